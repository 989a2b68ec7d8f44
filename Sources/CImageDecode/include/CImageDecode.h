#include <stddef.h>

/// A JPEG decoder over libjpeg's full API, whose errors longjmp: the setjmp has to be in C.
typedef struct yolo_jpeg yolo_jpeg;

/// Reads the headers of the `size` bytes at `data`, which must outlive the decoder. Returns
/// NULL only when out of memory; on a header error, `yolo_jpeg_message` is set and `width` 0.
/// `cmyk` is 1 for CMYK and YCCK files, which decode to CMYK (libjpeg has no CMYK to RGB).
yolo_jpeg *yolo_jpeg_open(const unsigned char *data, size_t size, int *width, int *height, int *cmyk);

/// Decodes into `out`, row by row, width · height · (cmyk ? 4 : 3) bytes. Returns 0 on
/// success, 1 when a scan ends early, cut or at EOI (it stops there instead of filling the
/// rest with gray), -1 on another error (see `yolo_jpeg_message`).
int yolo_jpeg_decode(yolo_jpeg *decoder, unsigned char *out);

const char *yolo_jpeg_message(const yolo_jpeg *decoder);

void yolo_jpeg_close(yolo_jpeg *decoder);
