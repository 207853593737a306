// crescent — cross-process port registry. See registry.hpp.
#include "bifurcation/registry.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

#include <crescent/log.hpp>

namespace crescent::bifurcation {

namespace {

std::optional<uint64_t> to_u64(const std::string& s) {
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr != s.data() + s.size() || s.empty()) return std::nullopt;
    return v;
}

std::string join_ports(const std::vector<uint16_t>& ports) {
    std::string out;
    for (uint16_t p : ports) out += (out.empty() ? "" : ",") + std::to_string(p);
    return out;
}

// mkdir -p. 0 or the errno of the mkdir that failed (ENOENT when a releaser
// removed a parent between two steps: the caller retries).
int make_dirs(const std::string& path, std::string* err) {
    for (size_t pos = 1; pos <= path.size(); ++pos) {
        if (pos != path.size() && path[pos] != '/') continue;
        const std::string prefix = path.substr(0, pos);
        if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
            const int e = errno;
            if (err) *err = fmt::format("cannot create {}: {}", prefix, std::strerror(e));
            return e;
        }
    }
    return 0;
}

bool write_file_atomic(const std::string& path, const std::string& text, std::string* err) {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::trunc);
        f << text;
        f.flush();
        if (!f) {
            if (err) *err = fmt::format("cannot write {}", tmp);
            return false;
        }
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        if (err) *err = fmt::format("cannot rename {}: {}", tmp, std::strerror(errno));
        ::unlink(tmp.c_str());
        return false;
    }
    return true;
}

// The exclusive lock on <dir>/.lock, released on scope exit. The lock file
// may be unlinked (and the directory removed) by the last release() while we
// wait for it (see registry.hpp, "Removal"), so a lock only counts once the
// path still names the inode we locked; otherwise we start again, re-creating
// the directory when `create`.
class DirLock {
public:
    DirLock(const std::string& dir, bool create, std::string* err) : path_(dir + "/.lock") {
        // Each retry means a release removed the directory under us; a bound
        // only guards against a broken file system.
        for (int attempt = 0; attempt < 1000; ++attempt) {
            if (create) {
                const int e = make_dirs(dir, err);
                if (e == ENOENT) continue;
                if (e != 0) return;
            }
            fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
            if (fd_ < 0) {
                const int e = errno;
                if (e == ENOENT && create) continue;
                if (err) *err = fmt::format("cannot open {}: {}", path_, std::strerror(e));
                return;
            }
            int rc;
            do {
                rc = ::flock(fd_, LOCK_EX);
            } while (rc != 0 && errno == EINTR);
            if (rc != 0) {
                if (err) *err = fmt::format("cannot lock {}: {}", path_, std::strerror(errno));
                close_fd();
                return;
            }
            struct stat held {}, named {};
            if (::fstat(fd_, &held) == 0 && ::stat(path_.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
                held.st_ino == named.st_ino)
                return; // locked, and still the registry's lock file
            close_fd(); // a release unlinked it while we waited
            if (!create) {
                if (err) *err = fmt::format("{} was removed", path_);
                return;
            }
        }
        if (err) *err = fmt::format("cannot lock {}: it keeps being removed", path_);
    }
    ~DirLock() { close_fd(); } // closing drops the flock
    DirLock(const DirLock&) = delete;
    DirLock& operator=(const DirLock&) = delete;
    bool ok() const { return fd_ >= 0; }
    const std::string& path() const { return path_; }

private:
    void close_fd() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }
    std::string path_;
    int fd_ = -1;
};

// parent_dir("/a/b/c/") == "/a/b", basename_of("/a/b/c/") == "c" ("" when
// there is no such component).
std::string parent_dir(const std::string& path) {
    const size_t end = path.find_last_not_of('/');
    if (end == std::string::npos) return {};
    const size_t slash = path.rfind('/', end);
    return slash == std::string::npos || slash == 0 ? std::string() : path.substr(0, slash);
}
std::string basename_of(const std::string& path) {
    const size_t end = path.find_last_not_of('/');
    if (end == std::string::npos) return {};
    const size_t slash = path.rfind('/', end);
    const size_t begin = slash == std::string::npos ? 0 : slash + 1;
    return path.substr(begin, end + 1 - begin);
}

// Whether `dir` holds nothing but the lock file.
bool only_lock_left(const std::string& dir) {
    DIR* d = ::opendir(dir.c_str());
    if (!d) return false;
    bool only = true;
    while (const dirent* de = ::readdir(d)) {
        const std::string_view name = de->d_name;
        if (name != "." && name != ".." && name != ".lock") {
            only = false;
            break;
        }
    }
    ::closedir(d);
    return only;
}

std::vector<std::string> entry_files(const std::string& dir) {
    std::vector<std::string> out;
    DIR* d = ::opendir(dir.c_str());
    if (!d) return out;
    while (const dirent* de = ::readdir(d)) {
        const std::string name = de->d_name;
        if (name.size() > 6 && name.compare(name.size() - 6, 6, ".entry") == 0)
            out.push_back(dir + "/" + name);
    }
    ::closedir(d);
    return out;
}

std::optional<std::string> read_file(const std::string& path) {
    std::ifstream f(path);
    if (!f) return std::nullopt;
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

} // namespace

// ---------------------------------------------------------------------------

RegistryEntry RegistryEntry::for_plan(const Plan& plan) {
    RegistryEntry e;
    e.pid = ::getpid();
    e.start_time = process_start_time(e.pid);
    e.app = plan.config().app_name;
    e.slot = plan.config().app_slot;
    e.client = plan.app_range();
    e.listen = plan.config().listen_ports;
    return e;
}

std::string RegistryEntry::serialize() const {
    std::string out;
    out += fmt::format("pid {}\n", pid);
    out += fmt::format("start_time {}\n", start_time);
    out += fmt::format("app {}\n", app);
    out += fmt::format("slot {}\n", slot);
    out += fmt::format("client {}-{}\n", client.lo, client.hi);
    out += fmt::format("listen {}\n", join_ports(listen));
    out += fmt::format("reserved_added {}\n", reserved_added);
    out += fmt::format("reserved_path {}\n", reserved_path);
    for (const auto& [k, v] : extra) out += fmt::format("x.{} {}\n", k, v);
    return out;
}

std::optional<RegistryEntry> RegistryEntry::parse(const std::string& text, std::string* err) {
    RegistryEntry e;
    bool have_pid = false, have_client = false;
    std::istringstream in(text);
    std::string line;
    auto bad = [&](const std::string& why) -> std::optional<RegistryEntry> {
        if (err) *err = fmt::format("bad registry line \"{}\": {}", line, why);
        return std::nullopt;
    };
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        const size_t sp = line.find(' ');
        const std::string key = line.substr(0, sp);
        const std::string val = sp == std::string::npos ? "" : line.substr(sp + 1);
        if (key == "pid") {
            auto v = to_u64(val);
            if (!v || *v == 0 || *v > uint64_t(INT32_MAX)) return bad("pid");
            e.pid = pid_t(*v);
            have_pid = true;
        } else if (key == "start_time") {
            auto v = to_u64(val);
            if (!v) return bad("start_time");
            e.start_time = *v;
        } else if (key == "app") {
            e.app = val;
        } else if (key == "slot") {
            auto v = to_u64(val);
            if (!v || *v > 65535) return bad("slot");
            e.slot = uint16_t(*v);
        } else if (key == "client") {
            const size_t dash = val.find('-');
            if (dash == std::string::npos) return bad("client range");
            auto lo = to_u64(val.substr(0, dash)), hi = to_u64(val.substr(dash + 1));
            if (!lo || !hi || *lo > *hi || *hi > 65535) return bad("client range");
            e.client = PortSpan{uint16_t(*lo), uint16_t(*hi)};
            have_client = true;
        } else if (key == "listen") {
            std::istringstream ps(val);
            std::string item;
            while (std::getline(ps, item, ',')) {
                auto v = to_u64(item);
                if (!v || *v == 0 || *v > 65535) return bad("listen port");
                e.listen.push_back(uint16_t(*v));
            }
        } else if (key == "reserved_added") {
            e.reserved_added = val;
        } else if (key == "reserved_path") {
            e.reserved_path = val;
        } else if (key.rfind("x.", 0) == 0) {
            e.extra[key.substr(2)] = val;
        } // unknown keys: written by a newer crescent; ignored
    }
    if (!have_pid || !have_client) {
        if (err) *err = "registry entry without pid or client range";
        return std::nullopt;
    }
    return e;
}

uint64_t process_start_time(pid_t pid) {
    std::optional<std::string> stat = read_file(fmt::format("/proc/{}/stat", pid));
    if (!stat) return 0;
    // "pid (comm) state ppid ..." — comm may contain spaces and ')': field 3
    // starts after the LAST ')'. starttime is field 22.
    const size_t close = stat->rfind(')');
    if (close == std::string::npos) return 0;
    std::istringstream in(stat->substr(close + 1));
    std::string field;
    for (int i = 3; i <= 22; ++i)
        if (!(in >> field)) return 0;
    return to_u64(field).value_or(0);
}

bool process_alive(pid_t pid, uint64_t start_time) {
    if (pid <= 0) return false;
    if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
    if (start_time == 0) return true;
    const uint64_t now = process_start_time(pid);
    return now == 0 || now == start_time; // 0: cannot tell (e.g. hidepid), assume alive
}

std::optional<std::string> entries_conflict(const RegistryEntry& mine, const RegistryEntry& theirs,
                                            const std::string& ifname) {
    const std::string who = fmt::format("application \"{}\" (pid {}, slot {})", theirs.app,
                                        theirs.pid, theirs.slot);
    if (mine.client.overlaps(theirs.client))
        return fmt::format(
            "crescent: port plan of \"{}\" on {} overlaps {}: client ports {} and {} intersect "
            "(give each application on an interface its own --app-slot)",
            mine.app, ifname, who, to_string(mine.client), to_string(theirs.client));
    for (uint16_t p : mine.listen) {
        for (uint16_t q : theirs.listen)
            if (p == q)
                return fmt::format("crescent: port plan of \"{}\" on {} overlaps {}: both listen "
                                   "on port {}",
                                   mine.app, ifname, who, p);
        if (theirs.client.contains(p))
            return fmt::format("crescent: port plan of \"{}\" on {} overlaps {}: listen port {} "
                               "lies in its client ports {}",
                               mine.app, ifname, who, p, to_string(theirs.client));
    }
    for (uint16_t q : theirs.listen)
        if (mine.client.contains(q))
            return fmt::format("crescent: port plan of \"{}\" on {} overlaps {}: its listen port "
                               "{} lies in our client ports {}",
                               mine.app, ifname, who, q, to_string(mine.client));
    return std::nullopt;
}

// ---------------------------------------------------------------------------

std::string Registry::default_dir(const std::string& ifname) {
    struct stat st {};
    const unsigned long long ino =
        ::stat("/proc/self/ns/net", &st) == 0 ? (unsigned long long)st.st_ino : 0ULL;
    return fmt::format("/run/crescent/net-{}/{}", ino, ifname);
}

std::optional<Registry> Registry::claim(const std::string& dir, const std::string& ifname,
                                        RegistryEntry mine, const StaleCleanup& cleanup,
                                        std::string* err) {
    DirLock lock(dir, /*create=*/true, err);
    if (!lock.ok()) return std::nullopt;
    auto lg = log::get("bifurcation");

    std::vector<RegistryEntry> live;
    for (const std::string& path : entry_files(dir)) {
        std::optional<std::string> text = read_file(path);
        if (!text) continue;
        std::string perr;
        std::optional<RegistryEntry> e = RegistryEntry::parse(*text, &perr);
        if (!e) {
            lg->warn("registry {}: removing unreadable entry {}: {}", dir, path, perr);
            ::unlink(path.c_str());
            continue;
        }
        if (!process_alive(e->pid, e->start_time)) {
            lg->warn("registry {}: process {} (\"{}\") is gone; cleaning up what it left "
                     "(reserved ports \"{}\")",
                     dir, e->pid, e->app, e->reserved_added);
            if (cleanup) cleanup(*e);
            ::unlink(path.c_str());
            continue;
        }
        live.push_back(std::move(*e));
    }
    for (const RegistryEntry& other : live)
        if (std::optional<std::string> msg = entries_conflict(mine, other, ifname)) {
            if (err) *err = *msg;
            return std::nullopt;
        }
    Registry r(dir, std::move(mine));
    if (!write_file_atomic(r.entry_path(), r.entry_.serialize(), err)) {
        r.dir_.clear();
        return std::nullopt;
    }
    return r;
}

std::vector<RegistryEntry> Registry::list(const std::string& dir) {
    std::vector<RegistryEntry> out;
    for (const std::string& path : entry_files(dir))
        if (std::optional<std::string> text = read_file(path))
            if (std::optional<RegistryEntry> e = RegistryEntry::parse(*text, nullptr))
                out.push_back(std::move(*e));
    return out;
}

Registry::Registry(Registry&& o) noexcept : dir_(std::move(o.dir_)), entry_(std::move(o.entry_)) {
    o.dir_.clear();
}

Registry::~Registry() { release(); }

std::string Registry::entry_path() const {
    return fmt::format("{}/{}-{}.entry", dir_, entry_.pid, entry_.slot);
}

bool Registry::update(const RegistryEntry& e, std::string* err) {
    if (dir_.empty()) {
        if (err) *err = "registry entry already released";
        return false;
    }
    std::string lerr;
    DirLock lock(dir_, /*create=*/false, &lerr);
    if (!lock.ok()) {
        if (err) *err = lerr;
        return false;
    }
    entry_ = e;
    return write_file_atomic(entry_path(), entry_.serialize(), err);
}

void Registry::release() {
    if (dir_.empty()) return;
    {
        std::string err;
        DirLock lock(dir_, /*create=*/false, &err);
        ::unlink(entry_path().c_str());
        // The last one out removes the lock file and the directory, under the
        // lock (registry.hpp, "Removal"). rmdir fails harmlessly (ENOTEMPTY)
        // when a starter re-created .lock in between.
        if (lock.ok() && only_lock_left(dir_)) {
            ::unlink(lock.path().c_str());
            if (::rmdir(dir_.c_str()) == 0) {
                // The namespace's directory (default_dir()'s "net-<inode>"), if
                // no other interface is registered in it.
                const std::string parent = parent_dir(dir_);
                if (basename_of(parent).rfind("net-", 0) == 0) ::rmdir(parent.c_str());
            }
        }
    }
    dir_.clear();
}

} // namespace crescent::bifurcation
