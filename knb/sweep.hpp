// knb sweep: a grid of runs (sizes, iodepths, threads, stacks, modes) over a
// test bed, each a `knb server` and `knb client` process pair, into one JSON.
#pragma once

namespace knb {

int sweep_main(int argc, char** argv);  // argv[0] is "sweep"

}  // namespace knb
