// knb_raw_helper — `knb raw` on its own (knb/raw.cpp), for tests/netns/knb_bed_test.py:
// `knb_raw_helper raw reflect|ping ...` behaves exactly like `knb raw reflect|ping ...`.
#include "knb/raw.hpp"

int main(int argc, char** argv) {
    if (argc < 2) return knb::raw_main(1, argv);  // "give reflect or ping", exit 2
    return knb::raw_main(argc - 1, argv + 1);
}
