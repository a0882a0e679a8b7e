// Appended after a kernel file: the table of its kernels (DG_KERNELS, from the Python side)
// and the C entry points the Python side calls.
static const DgKernel dg_kernels[] = {DG_KERNELS};

extern "C" int dg_n_kernels() { return sizeof(dg_kernels) / sizeof(dg_kernels[0]); }
extern "C" const char* dg_kernel_name(int i) { return dg_kernels[i].name; }
extern "C" int dg_kernel_params(int i, int* sizes, int* kinds) {
  for (int p = 0; p < dg_kernels[i].n_params; ++p) {
    sizes[p] = dg_kernels[i].params[p].size;
    kinds[p] = dg_kernels[i].params[p].kind;
  }
  return dg_kernels[i].n_params;
}

// Run kernel i over a (grid, grid_y, grid_z) grid of 1-D blocks of ``block`` threads, one
// block after another (x fastest).
extern "C" void dg_launch(int i, unsigned grid, unsigned grid_y, unsigned grid_z, unsigned block, void** args) {
  const DgKernel& k = dg_kernels[i];
  blockDim = dim3{block, 1, 1};
  gridDim = dim3{grid, grid_y, grid_z};
  const unsigned n_warps = (block + 31) / 32;
  for (unsigned b = 0; b < grid * grid_y * grid_z; ++b) {
    std::barrier<> bar(block);
    std::unique_ptr<DgWarp[]> warps(new DgWarp[n_warps]);
    dg_block = DgBlock{&bar, warps.get()};
    std::vector<std::thread> threads;
    threads.reserve(block);
    for (unsigned t = 0; t < block; ++t) {
      threads.emplace_back([&, t, b] {
        threadIdx = dim3{t, 0, 0};
        blockIdx = dim3{b % grid, (b / grid) % grid_y, b / (grid * grid_y)};
        k.run(k.fn, args);
        // a thread that has returned no longer takes part in barriers
        dg_block.warps[t >> 5].bar.arrive_and_drop();
        bar.arrive_and_drop();
      });
    }
    for (auto& th : threads) th.join();
  }
}
