#include "CImageDecode.h"
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <jpeglib.h>
#include <jerror.h>

struct yolo_jpeg {
    struct jpeg_decompress_struct cinfo;  // first, so that libjpeg's callbacks can cast back
    struct jpeg_error_mgr errors;
    struct jpeg_progress_mgr progress;
    jmp_buf escape;
    int truncated;  // an entropy decoder needed more bits than the scan held before EOI
    char message[JMSG_LENGTH_MAX];
};

static void fail(j_common_ptr cinfo) {
    yolo_jpeg *decoder = (yolo_jpeg *)cinfo;
    (*cinfo->err->format_message)(cinfo, decoder->message);
    longjmp(decoder->escape, 1);
}

// libjpeg only warns when a scan's data ends early, and fills the rest with gray; OpenCV
// returns that, here it is an error. Data ending in the scans reads as EOI (after "Premature
// end of JPEG file", alone a warning about a missing final EOI marker, which decodes whole as
// in OpenCV). Other warnings (stray bytes between markers, a bad segment before a restart
// marker) leave a whole image, kept as OpenCV keeps it.
static void warn(j_common_ptr cinfo, int level) {
    yolo_jpeg *decoder = (yolo_jpeg *)cinfo;
    if (level < 0 && cinfo->err->msg_code == JWRN_HIT_MARKER && decoder->cinfo.unread_marker == JPEG_EOI) {
        decoder->truncated = 1;
        longjmp(decoder->escape, 1);
    }
}

// Progressive files with absurd scan counts take unbounded time (TurboJPEG's LIMITSCANS).
static void limit_scans(j_common_ptr cinfo) {
    yolo_jpeg *decoder = (yolo_jpeg *)cinfo;
    if (decoder->cinfo.input_scan_number > 500) {
        snprintf(decoder->message, sizeof decoder->message, "progressive JPEG with more than 500 scans");
        longjmp(decoder->escape, 1);
    }
}

yolo_jpeg *yolo_jpeg_open(const unsigned char *data, size_t size, int *width, int *height, int *cmyk) {
    yolo_jpeg *decoder = calloc(1, sizeof *decoder);
    if (!decoder) return NULL;
    *width = *height = *cmyk = 0;
    decoder->cinfo.err = jpeg_std_error(&decoder->errors);
    decoder->errors.error_exit = fail;
    decoder->errors.emit_message = warn;
    decoder->progress.progress_monitor = limit_scans;
    if (setjmp(decoder->escape)) return decoder;
    jpeg_create_decompress(&decoder->cinfo);
    decoder->cinfo.progress = &decoder->progress;
    jpeg_mem_src(&decoder->cinfo, data, size);
    jpeg_read_header(&decoder->cinfo, TRUE);
    J_COLOR_SPACE space = decoder->cinfo.jpeg_color_space;
    *cmyk = space == JCS_CMYK || space == JCS_YCCK;
    // Defaults otherwise (accurate integer IDCT, fancy upsampling), as OpenCV's decoder.
    decoder->cinfo.out_color_space = *cmyk ? JCS_CMYK : JCS_EXT_RGB;
    *width = (int)decoder->cinfo.image_width;
    *height = (int)decoder->cinfo.image_height;
    return decoder;
}

int yolo_jpeg_decode(yolo_jpeg *decoder, unsigned char *out) {
    j_decompress_ptr cinfo = &decoder->cinfo;
    if (setjmp(decoder->escape)) return decoder->truncated ? 1 : -1;
    jpeg_start_decompress(cinfo);
    size_t stride = (size_t)cinfo->output_width * (size_t)cinfo->output_components;
    while (cinfo->output_scanline < cinfo->output_height) {
        JSAMPROW row = out + cinfo->output_scanline * stride;
        jpeg_read_scanlines(cinfo, &row, 1);
    }
    jpeg_finish_decompress(cinfo);
    return 0;
}

const char *yolo_jpeg_message(const yolo_jpeg *decoder) { return decoder->message; }

void yolo_jpeg_close(yolo_jpeg *decoder) {
    jpeg_destroy_decompress(&decoder->cinfo);
    free(decoder);
}
