// The TurboJPEG API of libjpeg-turbo: it reports errors as return codes, where the
// libjpeg API needs an error_exit that longjmps, which Swift cannot do.
#include <stddef.h>
#include <turbojpeg.h>
