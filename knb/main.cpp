// knb — the benchmark that judges crescent against the kernel (issue 10;
// Luna §3.1, §8.1): one binary, `knb server`, `knb client`, `knb sweep`,
// `knb raw`. See options.hpp for the flags, report.hpp for what it prints.
#include <cstdio>
#include <cstring>
#include <string>

#include "knb/client.hpp"
#include "knb/options.hpp"
#include "knb/raw.hpp"
#include "knb/report.hpp"
#include "knb/server.hpp"
#include "knb/sweep.hpp"

int main(int argc, char** argv) {
    if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
        std::fputs(knb::usage(), argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const std::string role = argv[1];
    if (role == "raw") return knb::raw_main(argc - 1, argv + 1);
    if (role == "sweep") return knb::sweep_main(argc - 1, argv + 1);
    for (int i = 2; i < argc; ++i)
        if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
            std::fputs(knb::usage(), stdout);
            return 0;
        }
    knb::Options o;
    std::string err;
    if (!knb::parse(argc - 1, argv + 1, &o, &err)) {
        std::fprintf(stderr, "knb %s: %s\n", role.c_str(), err.c_str());
        return 2;
    }
    if (o.role == knb::Role::Server) return knb::run_server(o);
    knb::Result r;
    const int rc = knb::run_client(o, &r);
    if (rc == 0 || r.completed > 0 || r.seconds > 0) {
        knb::print_header(stdout);
        knb::print_row(stdout, r);
    }
    if (!o.json.empty()) {
        std::string werr;
        if (!knb::write_file(o.json, knb::to_json(r), &werr)) {
            std::fprintf(stderr, "knb client: %s\n", werr.c_str());
            return rc ? rc : 1;
        }
    }
    return rc;
}
