// Host tiling of the window gather (see window_gather_tiling.h and common/op_kernel/window_gather.h).
#include "window_gather_tiling.h"
#include "tiling_common.h"

namespace mxs_ascend {

namespace {
constexpr int64_t kMaxRowBytes = 512;   // = kWgMaxRowBytes of the kernel: wider rows go in column chunks
constexpr int64_t kMaxWindowBytes = 64 * 1024;

int64_t Pow2AtLeast(int64_t v) {
    int64_t p = 8;
    while (p < v) p *= 2;
    return p;
}
}  // namespace

int64_t WindowGatherUbBytes(const WindowGatherTiling& g) {
    const int64_t rowBytes = (int64_t)g.rowWords * g.wordBytes;
    const int64_t words = (int64_t)g.chunkRows * g.segWords;
    const int64_t zeroBytes = AlignUp(g.pitch > rowBytes ? g.pitch : rowBytes, 32);
    return AlignUp((int64_t)g.tileRows * g.kvol * 4, 32)   // nbr tile
           + 5 * ((int64_t)g.entryLanes + 8) * 4           // entry vectors
           + (int64_t)g.entryLanes * 4 + 96                 // entry offsets, tree shuffles
           + 3 * words * 4                                  // word -> entry, word offset, gather offsets
           + 3 * words * g.wordBytes                        // two slab segments + merge scratch
           + AlignUp((int64_t)g.windowRows * g.pitch, 32) + zeroBytes;  // window + zero row
}

bool WindowGatherTilingFor(int64_t kvol, int64_t cin, int64_t esz, int64_t group, int64_t tileRows, int64_t ubBudget,
                           WindowGatherTiling& g) {
    g = WindowGatherTiling{};
    if (kvol <= 0 || cin <= 0 || esz <= 0 || tileRows <= 0) return false;
    const int64_t X = (group >= 1 && kvol % group == 0) ? group : 1;
    const bool chunked = cin * esz > kMaxRowBytes;
    const int64_t colChunk = chunked ? kMaxRowBytes / esz : cin;
    const int64_t rowBytes = colChunk * esz;
    const int64_t wb = rowBytes % 4 == 0 ? 4 : 2;
    const int64_t rowWords = rowBytes / wb;
    const int64_t pitch = chunked ? AlignUp(rowBytes, 32) : rowBytes;
    const int64_t subRowWords = chunked ? pitch / wb : rowWords;
    const int64_t segWords = AlignUp(X * subRowWords * wb, 32) / wb;
    g.kvol = (int32_t)kvol; g.cin = (int32_t)cin; g.group = (int32_t)X; g.tileRows = (int32_t)tileRows;
    g.colChunk = (int32_t)colChunk; g.pitch = (int32_t)pitch;
    g.wordBytes = (int32_t)wb; g.rowWords = (int32_t)rowWords; g.subRowWords = (int32_t)subRowWords;
    g.segWords = (int32_t)segWords;
    // rows per pass: the largest multiple of 8 (at most the tile, at most 256) whose buffers fit with
    // a window of 4 passes' worth of rows (at least 64 rows, at most 64 KiB / 4095 rows)
    const int64_t maxTg = Min64(256, AlignUp(tileRows, 8));
    for (int64_t Tg = maxTg; Tg >= 8; Tg -= 8) {
        int64_t W = Max64(64, 4 * Tg);
        W = Min64(W, Max64(8, kMaxWindowBytes / pitch));
        if (chunked) W = Min64(W, 4095);
        g.chunkRows = (int32_t)Tg;
        g.windowRows = (int32_t)W;
        g.entryLanes = (int32_t)Pow2AtLeast(Tg * X);
        const int64_t ub = WindowGatherUbBytes(g);
        if (ub <= ubBudget) {
            g.ubBytes = (int32_t)ub;
            return true;
        }
    }
    return false;
}

}  // namespace mxs_ascend
