// Stable partition of node row segments: left rows first, order kept within each side.
//
// The decisions come from the split parents' node records on the device, so no host data is
// needed. Each parent's segment is cut into tiles of kTile = kThreads * kItems positions
// (``segment_offsets`` in nodes.cu numbers the tiles; tile t belongs to the last parent whose
// first tile is <= t). Thread mapping: one block per tile in every pass, position
// ``tile start + item * kThreads + thread`` (coalesced), blocks past the last tile exit.
//  1. ``partition_flags``: per position, the row's split-feature symbol (one 8-byte load,
//     scattered since rows are permuted; the feature's ELLPACK offset and width and its
//     missing symbol, its number of bins, are looked up once per thread) -> a 0/1 byte
//     flag; the tile's left count. A parent that is not split (feature < 0, in a level grown
//     whole) sends every row left: its rows stay where they are. The last block to finish
//     (a counter, then a fence) scans the tile counts and writes each parent's (left,
//     right) counts: one launch less a level. With ``split`` it then makes the parents'
//     children (split_nodes.cuh: records, the child to build, the next scans), and every
//     block zeroes a slice of ``zero`` (the level's histograms about to be built): two
//     launches less again.
//  2. ``partition_scatter``: ranks inside the tile by warp ballots, plus the tile's base,
//     give each row its place; rows go to a buffer at their final absolute positions. A
//     thread loads its kItems rows and flags first, and one barrier serves all kItems
//     rounds of warp counts.
//  3. ``partition_copy_back``: buffer -> rows over the split segments. A caller whose next
//     reads need only the split segments takes the buffer as its rows instead (the
//     backend's ``partition(out=...)``): no copy back.
// Categorical splits (``has_cat`` != 0): a parent whose feature is categorical (``is_cat``)
// sends a row left iff its bin's bit is NOT set in the parent's row of ``cat_bits`` (uint32
// (k, cat_words), the categories that go right); a missing bin goes by default_left. The
// bitset is read through the read-only cache (a node's words are shared by its tiles).
// Memory traffic per row: 4 B row + 8 B symbol + 1 B flag written; 1 B flag + 4 B row read,
// 4 B written; 8 B copied back unless the caller takes the buffer (~30 B a row, no host
// round trip, no library scan).
#include "categorical.cuh"
#include "split_nodes.cuh"

using namespace dgboost;

#define kThreads 256
#define kItems 8
#define kTile (kThreads * kItems)

// Last i in [0, n) with offsets[i] <= t (offsets non-decreasing, offsets[0] = 0).
__device__ __forceinline__ int last_at_most(const long long* __restrict__ offsets, int n, long long t) {
  int a = 0, b = n;
  while (b - a > 1) {
    const int mid = (a + b) >> 1;
    if (offsets[mid] <= t) a = mid; else b = mid;
  }
  return a;
}

struct TileSpan {
  int node;
  long long start;  // first absolute position of the tile
  long long stop;   // one past its last position
  long long begin;  // the node's first position
};

__device__ __forceinline__ bool tile_span(const long long* __restrict__ parents, int k,
                                          const long long* __restrict__ tile_offsets, TileSpan& s) {
  const long long t = blockIdx.x;
  if (t >= tile_offsets[k]) return false;
  s.node = last_at_most(tile_offsets, k, t);
  const long long* rec = parents + static_cast<long long>(s.node) * kNodeFields;
  s.begin = rec[kBegin];
  s.start = s.begin + (t - tile_offsets[s.node]) * kTile;
  s.stop = min(s.start + kTile, rec[kEnd]);
  return true;
}

// tile_scan[t] = left rows of the tiles before t (all parents), tile_scan[T] = total;
// counts[j] = (left, right) rows of parent j. ``tile_lefts`` are read through L2 (__ldcg):
// other blocks wrote them.
__device__ void scan_tiles(const long long* __restrict__ parents, int k, const long long* __restrict__ tile_offsets,
                           const long long* tile_lefts, long long* __restrict__ tile_scan,
                           long long* __restrict__ counts, long long* partial) {
  block_exclusive_scan(static_cast<int>(tile_offsets[k]), [&](int i) { return __ldcg(tile_lefts + i); }, tile_scan,
                       partial);
  __syncthreads();
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    const long long* rec = parents + static_cast<long long>(j) * kNodeFields;
    const long long left = tile_scan[tile_offsets[j + 1]] - tile_scan[tile_offsets[j]];
    counts[2 * j] = left;
    counts[2 * j + 1] = rec[kEnd] - rec[kBegin] - left;
  }
}

// ``done``: a zeroed counter; the last block leaves it zero again for the next launch.
extern "C" __global__ void __launch_bounds__(kThreads) partition_flags(
    const unsigned int* __restrict__ packed, int row_bits, const int2* __restrict__ layout,
    const int* __restrict__ cut_ptrs, const int* __restrict__ rows, const long long* __restrict__ parents, int k,
    const long long* __restrict__ tile_offsets, const unsigned char* __restrict__ is_cat,
    const unsigned int* __restrict__ cat_bits, int cat_words, int has_cat, unsigned char* __restrict__ flags,
    long long* __restrict__ tile_lefts, long long* __restrict__ tile_scan, long long* __restrict__ counts,
    unsigned int* __restrict__ done, int split, int by_hessian, long long* __restrict__ children,
    long long* __restrict__ build_segments, long long* __restrict__ build_left, long long* __restrict__ build_offsets,
    long long* __restrict__ child_tiles, longlong2* __restrict__ zero, long long zero_pairs) {
  __shared__ int warp_sums[kThreads / 32];
  __shared__ long long partial[kThreads];
  __shared__ bool last;
  // the level's histograms, zeroed before their build (a launch after this one's scatter)
  for (long long i = blockIdx.x * static_cast<long long>(kThreads) + threadIdx.x; i < zero_pairs;
       i += static_cast<long long>(gridDim.x) * kThreads)
    zero[i] = make_longlong2(0, 0);
  TileSpan s;
  if (tile_span(parents, k, tile_offsets, s)) {  // blocks past the last tile only count themselves
    const long long* rec = parents + static_cast<long long>(s.node) * kNodeFields;
    const long long feature = rec[kFeature], split_bin = rec[kSplitBin];
    const unsigned char dl = rec[kDefaultLeft] != 0 ? 1 : 0;
    // a categorical parent's bitset (categories that go right); null for a numeric one
    const unsigned int* node_bits =
        has_cat && feature >= 0 && is_cat[feature] ? cat_bits + static_cast<long long>(s.node) * cat_words : nullptr;
    // the split feature's entry: (offset, width) in a row and its missing symbol
    int entry_offset = 0, width = 1;
    unsigned missing = 0u;
    if (feature >= 0) {
      const int2 lay = layout[feature];
      entry_offset = lay.x;
      width = lay.y;
      missing = static_cast<unsigned>(cut_ptrs[feature + 1] - cut_ptrs[feature]);
    }
    int lefts = 0;
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      const long long p = s.start + it * kThreads + threadIdx.x;
      if (p < s.stop) {
        unsigned char f = 1;
        if (feature >= 0) {
          const int r = rows[p];
          const unsigned sym = read_symbol(packed, static_cast<uint64_t>(r) * row_bits + entry_offset, width);
          f = symbol_goes_left(sym, missing, dl != 0, node_bits, cat_words, split_bin) ? 1 : 0;
        }
        flags[p] = f;
        lefts += f;
      }
    }
    for (int d = 16; d > 0; d >>= 1) lefts += __shfl_down_sync(0xffffffffu, lefts, d);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = lefts;
    __syncthreads();
    if (threadIdx.x == 0) {
      long long total = 0;
      for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
      tile_lefts[blockIdx.x] = total;
    }
  }
  if (threadIdx.x == 0) {
    __threadfence();  // this block's tile count is visible before the counter moves
    last = atomicAdd(done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  scan_tiles(parents, k, tile_offsets, tile_lefts, tile_scan, counts, partial);
  if (threadIdx.x == 0) *done = 0u;
  if (!split) return;
  __syncthreads();  // the counts, written by this block's threads
  // ``child_tiles`` must not be this launch's ``tile_offsets``: the scatter reads those next
  split_and_scan(parents, k, counts, counts, by_hessian, children, build_segments, build_left, kTile, build_offsets,
                 child_tiles, partial);
}

extern "C" __global__ void __launch_bounds__(kThreads) partition_scatter(
    const int* __restrict__ rows, const unsigned char* __restrict__ flags,
    const long long* __restrict__ parents, int k, const long long* __restrict__ tile_offsets,
    const long long* __restrict__ tile_scan, const long long* __restrict__ counts, int* __restrict__ buffer) {
  TileSpan s;
  if (!tile_span(parents, k, tile_offsets, s)) return;
  // each warp's left count of each item, so one barrier serves the tile's kItems rounds
  __shared__ int warp_counts[kItems][kThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned lanes_below = (1u << lane) - 1u;
  // every item's loads are issued before the first is used: kItems loads in flight a thread
  int row[kItems];
  bool left[kItems];
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    const long long p = s.start + it * kThreads + threadIdx.x;
    const bool valid = p < s.stop;
    row[it] = valid ? rows[p] : 0;
    left[it] = valid && flags[p] != 0;
  }
  unsigned ballot[kItems];
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    ballot[it] = __ballot_sync(0xffffffffu, left[it]);
    if (lane == 0) warp_counts[it][warp] = __popc(ballot[it]);
  }
  __syncthreads();
  // left rows of this node before this tile, and the node's left count
  long long lefts_before = tile_scan[blockIdx.x] - tile_scan[tile_offsets[s.node]];
  const long long node_lefts = counts[2 * s.node];
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    int warp_base = 0, total = 0;
    for (int w = 0; w < kThreads / 32; ++w) {
      const int c = warp_counts[it][w];
      warp_base += w < warp ? c : 0;
      total += c;
    }
    const long long p = s.start + it * kThreads + threadIdx.x;
    if (p < s.stop) {
      const long long lefts_here = lefts_before + warp_base + __popc(ballot[it] & lanes_below);
      const long long offset = p - s.begin;  // position inside the node's segment
      const long long dest = left[it] ? s.begin + lefts_here : s.begin + node_lefts + (offset - lefts_here);
      buffer[dest] = row[it];
    }
    lefts_before += total;
  }
}

extern "C" __global__ void __launch_bounds__(kThreads) partition_copy_back(
    const int* __restrict__ buffer, const long long* __restrict__ parents, int k,
    const long long* __restrict__ tile_offsets, int* __restrict__ rows) {
  TileSpan s;
  if (!tile_span(parents, k, tile_offsets, s)) return;
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    const long long p = s.start + it * kThreads + threadIdx.x;
    if (p < s.stop) rows[p] = buffer[p];
  }
}

// The root's row order, rows[i] = i for i < n: 16-byte stores of four rows, the last n % 4 rows
// one by one, grid-stride over groups of four rows. On 10M rows it took 9.8 us on an H200
// against CuPy's arange's 48 us, which writes one int32 a thread (docs/performance-notes.md,
// "The root's row order in 16-byte stores").
extern "C" __global__ void __launch_bounds__(kThreads) root_rows(int* __restrict__ rows, long long n) {
  const long long quads = n >> 2;
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  int4* rows4 = reinterpret_cast<int4*>(rows);
  for (long long q = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; q < quads; q += step) {
    const int i = static_cast<int>(q << 2);  // rows are int32
    rows4[q] = make_int4(i, i + 1, i + 2, i + 3);
  }
  const long long tail = (quads << 2) + blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (tail < n) rows[tail] = static_cast<int>(tail);
}
