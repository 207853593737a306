// crescent — net.ipv4.ip_local_reserved_ports merge and restore. See reserved_ports.hpp.
#include "bifurcation/reserved_ports.hpp"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <crescent/log.hpp>

namespace crescent::bifurcation {

namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
    return s;
}

std::optional<uint16_t> parse_port(std::string_view s) {
    s = trim(s);
    if (s.empty()) return std::nullopt;
    unsigned v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr != s.data() + s.size() || v > 65535) return std::nullopt;
    return uint16_t(v);
}

} // namespace

std::optional<PortSet> PortSet::parse(std::string_view text, std::string* err) {
    PortSet set;
    text = trim(text);
    if (text.empty()) return set;
    size_t pos = 0;
    while (pos <= text.size()) {
        size_t comma = text.find(',', pos);
        if (comma == std::string_view::npos) comma = text.size();
        const std::string_view item = text.substr(pos, comma - pos);
        const size_t dash = item.find('-');
        std::optional<uint16_t> lo, hi;
        if (dash == std::string_view::npos) {
            lo = hi = parse_port(item);
        } else {
            lo = parse_port(item.substr(0, dash));
            hi = parse_port(item.substr(dash + 1));
        }
        if (!lo || !hi || *lo > *hi) {
            if (err)
                *err = fmt::format("bad port list item \"{}\" in \"{}\" (want N or LOW-HIGH, "
                                   "0-65535, comma separated)",
                                   trim(item), text);
            return std::nullopt;
        }
        set.add(PortSpan{*lo, *hi});
        pos = comma + 1;
    }
    return set;
}

void PortSet::add(PortSpan s) {
    if (s.lo > s.hi) return;
    for (uint32_t p = s.lo; p <= s.hi; ++p) bits_.set(p);
}

std::vector<PortSpan> PortSet::spans() const {
    std::vector<PortSpan> out;
    uint32_t p = 0;
    while (p < 65536) {
        if (!bits_.test(p)) { ++p; continue; }
        const uint32_t lo = p;
        while (p < 65536 && bits_.test(p)) ++p;
        out.push_back(PortSpan{uint16_t(lo), uint16_t(p - 1)});
    }
    return out;
}

std::string PortSet::format() const {
    std::string out;
    for (PortSpan s : spans()) {
        if (!out.empty()) out += ',';
        out += to_string(s);
    }
    return out;
}

// ---------------------------------------------------------------------------

ReservedPorts::ReservedPorts(ReservedPorts&& o) noexcept
    : path_(std::move(o.path_)), added_(o.added_) {
    o.added_ = PortSet();
}

ReservedPorts::~ReservedPorts() {
    std::string err;
    if (!restore(&err)) log::get("bifurcation")->error("{}", err);
}

std::optional<PortSet> ReservedPorts::read(const std::string& path, std::string* err) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (err) *err = fmt::format("cannot read {}: {}", path, std::strerror(errno));
        return std::nullopt;
    }
    std::string text;
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            if (err) *err = fmt::format("cannot read {}: {}", path, std::strerror(errno));
            ::close(fd);
            return std::nullopt;
        }
        if (n == 0) break;
        text.append(buf, size_t(n));
    }
    ::close(fd);
    std::string perr;
    std::optional<PortSet> set = PortSet::parse(text, &perr);
    if (!set && err) *err = fmt::format("{}: {}", path, perr);
    return set;
}

bool ReservedPorts::write(const std::string& path, const PortSet& set, std::string* err) {
    // One write() of the whole list: the sysctl handler parses a single buffer.
    const std::string text = set.format() + "\n";
    const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) {
        if (err) *err = fmt::format("cannot write {}: {}", path, std::strerror(errno));
        return false;
    }
    ssize_t n;
    do {
        n = ::write(fd, text.data(), text.size());
    } while (n < 0 && errno == EINTR);
    const int write_errno = errno;
    ::close(fd);
    if (n != ssize_t(text.size())) {
        if (err)
            *err = fmt::format("cannot write \"{}\" to {}: {}", set.format(), path,
                               n < 0 ? std::strerror(write_errno) : "short write");
        return false;
    }
    return true;
}

bool ReservedPorts::remove_ports(const std::string& path, const PortSet& ports,
                                 std::string* err) {
    if (ports.empty()) return true;
    std::optional<PortSet> cur = read(path, err);
    if (!cur) return false;
    const PortSet next = cur->minus(ports);
    if (next == *cur) return true;
    return write(path, next, err);
}

bool ReservedPorts::reserve(const PortSet& want, std::string* err) {
    std::optional<PortSet> cur = read(path_, err);
    if (!cur) return false;
    const PortSet fresh = want.minus(*cur);
    if (fresh.empty()) return true;
    PortSet next = *cur;
    next.add(fresh);
    if (!write(path_, next, err)) return false;
    added_.add(fresh);
    log::get("bifurcation")
        ->info("reserved local ports {} in {} (was \"{}\")", fresh.format(), path_, cur->format());
    return true;
}

bool ReservedPorts::restore(std::string* err) {
    if (added_.empty()) return true;
    if (!remove_ports(path_, added_, err)) return false;
    log::get("bifurcation")->info("released reserved local ports {} in {}", added_.format(), path_);
    added_ = PortSet();
    return true;
}

} // namespace crescent::bifurcation
