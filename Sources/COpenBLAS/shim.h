#include <cblas.h>

// Exported by Debian's DYNAMIC_ARCH OpenBLAS but absent from its headers: they let the
// runtime re-select the kernel set after setting OPENBLAS_CORETYPE (see Tensor/BLAS.swift).
void gotoblas_dynamic_init(void);
void gotoblas_dynamic_quit(void);
