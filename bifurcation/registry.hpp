// crescent — who uses which ports on an interface: a small cross-process registry.
//
// Several crescent processes may share one interface with the kernel, each with
// its own application slot (plan.hpp). Each registers what it takes in a
// directory, by default /run/crescent/net-<netns inode>/<ifname>/ (interface
// names and the reserved-ports sysctl are per network namespace, so the
// namespace is part of the key):
//
//   .lock            flock()ed while an entry is claimed / released
//   <pid>-<slot>.entry  one file per live plan ("key value" lines, see below)
//
// claim() takes the lock, removes the entries of dead processes (a pid that no
// longer exists, or exists with another start time: pid reuse) after handing
// each to a cleanup callback — which undoes what that process left behind
// (reserved ports, ntuple rules, an XDP program) — then refuses a plan whose
// client ports or listening ports overlap a live entry, with a message naming
// both processes. The entry is removed again by release() / the destructor.
//
// Removal: nothing stays behind once the last process on an interface is
// gone. The release() that removes the last entry, still holding the lock,
// unlinks .lock, removes the then-empty <ifname> directory and, if it is
// empty too, the net-<inode> directory above it (a parent named otherwise is
// left alone). Starters race with that safely because a lock only counts when
// it is held on the file the path names:
//   1. mkdir -p the directory; open(.lock, O_CREAT); flock(LOCK_EX);
//   2. if .lock no longer exists or is another inode than the one locked (a
//      release unlinked it while we waited), close and go back to 1;
//   3. a mkdir or open failing with ENOENT (a release removed a directory
//      between two steps) also goes back to 1.
// A release never removes a directory holding anything but .lock (rmdir
// fails if a starter re-created .lock in between: the directory stays, with a
// valid lock), and entries are only written under a valid lock, so an entry
// is never lost with its directory. A crashed process's entry stays until the
// next claim() on that interface cleans it up.
//
// Set-up / shutdown only (file I/O, flock).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bifurcation/plan.hpp"

namespace crescent::bifurcation {

struct RegistryEntry {
    pid_t pid = 0;
    uint64_t start_time = 0;        // /proc/<pid>/stat field 22; 0 = unknown
    std::string app;                // application name
    uint16_t slot = 0;
    PortSpan client{};              // the application's client ports
    std::vector<uint16_t> listen;   // its listening ports
    std::string reserved_added;     // ports it added to ip_local_reserved_ports (kernel syntax)
    std::string reserved_path;      // the sysctl file it wrote ("" = none)
    // Backend state another process needs to clean up after a crash, e.g.
    // "ntuple_locs" -> "1023,1022", "xdp_prog_id" -> "42". Keys and values
    // without blanks or newlines.
    std::map<std::string, std::string> extra;

    static RegistryEntry for_plan(const Plan& plan); // this process, the plan's ports
    std::string serialize() const;
    static std::optional<RegistryEntry> parse(const std::string& text, std::string* err);
};

// Whether a process with this pid and start time still runs (start_time 0:
// any process with that pid counts).
bool process_alive(pid_t pid, uint64_t start_time);
// The start time of a process (/proc/<pid>/stat field 22), 0 if unknown.
uint64_t process_start_time(pid_t pid);

// An error message if the two entries overlap (client ports or a listening
// port), else nullopt.
std::optional<std::string> entries_conflict(const RegistryEntry& mine, const RegistryEntry& theirs,
                                            const std::string& ifname);

class Registry {
public:
    using StaleCleanup = std::function<void(const RegistryEntry&)>;

    // /run/crescent/net-<inode of /proc/self/ns/net>/<ifname>
    static std::string default_dir(const std::string& ifname);

    // See the file comment. `dir` is created if missing. nullopt and *err on
    // a conflict or an I/O error.
    static std::optional<Registry> claim(const std::string& dir, const std::string& ifname,
                                         RegistryEntry mine, const StaleCleanup& cleanup,
                                         std::string* err);
    // The entries in `dir` (live and dead), unlocked snapshot.
    static std::vector<RegistryEntry> list(const std::string& dir);

    Registry(const Registry&) = delete;
    Registry& operator=(const Registry&) = delete;
    Registry(Registry&& o) noexcept;
    Registry& operator=(Registry&&) = delete;
    ~Registry(); // release()

    // Rewrite our entry (e.g. once the reserved ports or backend state are
    // known: record them BEFORE applying them, so a crash in between is undone).
    bool update(const RegistryEntry& e, std::string* err);
    const RegistryEntry& entry() const { return entry_; }
    const std::string& dir() const { return dir_; }
    // Remove our entry. Idempotent.
    void release();

private:
    Registry(std::string dir, RegistryEntry e) : dir_(std::move(dir)), entry_(std::move(e)) {}
    std::string entry_path() const;
    std::string dir_; // "" after release / move
    RegistryEntry entry_;
};

} // namespace crescent::bifurcation
