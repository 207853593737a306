// crescent tests — "no zbuf leaked" helpers for Catch2 tests.
//
//   TEST_CASE("...") {
//       crescent::test::ZbufArenaFixture arena;   // or use an arena of your own
//       crescent::test::LeakCheck leaks;          // remembers arena live() now
//       ...                                       // test body
//   }                                             // CHECKs live() is back
//
// `LeakCheck` drains the calling core's return ring before comparing, so frees
// that other (joined) threads sent back through it are counted as freed. Objs
// still parked by another core (ring full) count as live: drain on that core.
// `verify()` REQUIREs the same at any point (a destructor must not throw, so the
// destructor only CHECKs).
#pragma once

#include <catch2/catch.hpp>

#include <crescent/zbuf.hpp>

#include <memory>
#include <optional>
#include <string>

namespace crescent::test {

class LeakCheck {
public:
    LeakCheck() : arena_(zbuf::Arena::current()), before_(arena_ ? arena_->live() : 0) {}
    ~LeakCheck() {
        if (!arena_ || arena_ != zbuf::Arena::current()) return;
        arena_->drain_returns();
        uint64_t now = arena_->live();
        INFO("zbuf objs live at the end of the scope: " << now << ", at its start: " << before_);
        CHECK(now == before_);
    }
    void verify() const {
        REQUIRE(arena_ == zbuf::Arena::current());
        arena_->drain_returns();
        REQUIRE(arena_->live() == before_);
    }
    LeakCheck(const LeakCheck&) = delete;
    LeakCheck& operator=(const LeakCheck&) = delete;

private:
    zbuf::Arena* arena_;
    uint64_t before_;
};

// A small anonymous-memory arena plus core 0 for the test's thread, for tests
// that need zbufs but no particular arena. Checks for leaks when it goes away.
class ZbufArenaFixture {
public:
    explicit ZbufArenaFixture(size_t bytes = 16u << 20, unsigned core = 0) {
        zbuf::Config cfg;
        cfg.backing = zbuf::Backing::Anonymous;
        cfg.bytes = bytes;
        std::string err;
        arena_ = zbuf::Arena::create(cfg, &err);
        INFO(err);
        REQUIRE(arena_);
        core_.emplace(core);
        leaks_.emplace();
    }
    ~ZbufArenaFixture() { leaks_.reset(); core_.reset(); }
    zbuf::Arena& arena() { return *arena_; }
    zbuf::Arena* operator->() { return arena_.get(); }

private:
    std::unique_ptr<zbuf::Arena> arena_;
    std::optional<zbuf::CoreScope> core_;
    std::optional<LeakCheck> leaks_;
};

} // namespace crescent::test
