// Unit tests: crescent::InlineFunction (include/crescent/function.hpp) — what
// fits stays inside (no allocation, counted by this binary's operator new),
// what does not goes to the heap; every callable copy is destroyed exactly
// once through moves, copies, assignments and resets; empty ones behave as
// std::function's do.
#include <catch2/catch.hpp>

#include <array>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <string>

#include <crescent/function.hpp>

using crescent::InlineFunction;

namespace {
size_t g_news = 0;
}

// Every unaligned form, so that whatever one form allocates another frees
// consistently (ASan checks the pairing); the aligned forms stay the runtime's.
void* operator new(size_t n) {
    ++g_news;
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
    ++g_news;
    return std::malloc(n ? n : 1);
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

// A callable that counts its live copies.
struct Counted {
    static inline int live = 0;
    std::array<uint64_t, 3> pad{};  // 24 bytes of captures, as knb's continuation
    int* calls;
    explicit Counted(int* c) : calls(c) { ++live; }
    Counted(const Counted& o) : pad(o.pad), calls(o.calls) { ++live; }
    Counted(Counted&& o) noexcept : pad(o.pad), calls(o.calls) { ++live; }
    ~Counted() { --live; }
    int operator()(int x) { return ++*calls + x; }
};

struct Big {  // beyond the 48 bytes of room
    static inline int live = 0;
    std::array<uint64_t, 8> pad{};
    Big() { ++live; }
    Big(const Big& o) : pad(o.pad) { ++live; }
    Big(Big&& o) noexcept : pad(o.pad) { ++live; }
    ~Big() { --live; }
    int operator()(int x) { return x + int(pad[7]); }
};

int twice(int x) { return 2 * x; }

} // namespace

TEST_CASE("a callable that fits is kept inside: no allocation to make, move, call or drop it", "[function]")
{
    int calls = 0;
    {
        const size_t before = g_news;
        InlineFunction<int(int)> f = Counted(&calls);
        REQUIRE(f.is_inline());
        CHECK(f(1) == 2);
        InlineFunction<int(int)> g = std::move(f);
        CHECK_FALSE(f);
        CHECK(g(1) == 3);
        f = std::move(g);
        CHECK(f(0) == 3);
        CHECK(g_news == before);
        CHECK(Counted::live == 1);
        // What std::function does with the same callable (libstdc++: 2 pointers inline).
        std::function<int(int)> s = Counted(&calls);
        CHECK(g_news == before + 1);
    }
    CHECK(Counted::live == 0);
    // Captures of a lambda: this + two 8-byte values (the RPC continuation's shape), and 48 bytes.
    const size_t before = g_news;
    uint64_t a = 1, b = 2, c = 3, d = 4, e = 5;
    InlineFunction<uint64_t()> three = [&calls, a, b] { return uint64_t(calls) + a + b; };
    InlineFunction<uint64_t()> six = [&calls, a, b, c, d, e] { return uint64_t(calls) + a + b + c + d + e; };
    CHECK(three.is_inline());
    CHECK(six.is_inline());
    CHECK(three() == 3u + 3u);
    CHECK(six() == 3u + 15u);
    CHECK(g_news == before);
}

TEST_CASE("a larger callable goes to the heap and is freed once", "[function]")
{
    {
        const size_t before = g_news;
        Big big;
        big.pad[7] = 40;
        InlineFunction<int(int)> f = big;
        CHECK_FALSE(f.is_inline());
        CHECK(g_news == before + 1);
        CHECK(f(2) == 42);
        InlineFunction<int(int)> g = std::move(f);  // the pointer moves, nothing is copied
        CHECK(g_news == before + 1);
        CHECK(Big::live == 2);
        CHECK(g(2) == 42);
        InlineFunction<int(int)> h = g;  // a copy is a new heap object
        CHECK(g_news == before + 2);
        CHECK(Big::live == 3);
        h = nullptr;
        CHECK(Big::live == 2);
    }
    CHECK(Big::live == 0);
}

TEST_CASE("copies, assignments and resets destroy every copy once", "[function]")
{
    int calls = 0;
    {
        InlineFunction<int(int)> f = Counted(&calls);
        InlineFunction<int(int)> g = f;  // copy
        CHECK(Counted::live == 2);
        g = f;  // copy-assign over a live one
        CHECK(Counted::live == 2);
        g = g;  // self-assignment
        CHECK(Counted::live == 2);
        InlineFunction<int(int)> h;
        h = std::move(g);
        CHECK(Counted::live == 2);
        CHECK_FALSE(g);
        h = Big();  // replaced by another kind
        CHECK(Counted::live == 1);
        CHECK(Big::live == 1);
        f(0);
        CHECK(calls == 1);
    }
    CHECK(Counted::live == 0);
    CHECK(Big::live == 0);
}

TEST_CASE("empty ones are std::function's empty ones", "[function]")
{
    InlineFunction<int(int)> a;
    InlineFunction<int(int)> b = nullptr;
    InlineFunction<int(int)> c = std::function<int(int)>();
    int (*null_fn)(int) = nullptr;
    InlineFunction<int(int)> d = null_fn;
    for (auto* f : {&a, &b, &c, &d}) {
        CHECK_FALSE(*f);
        CHECK(*f == nullptr);
        CHECK_THROWS_AS((*f)(1), std::bad_function_call);
    }
    InlineFunction<int(int)> e = twice;
    CHECK(e(21) == 42);
    InlineFunction<int(int)> s = std::function<int(int)>(twice);  // a std::function is a callable too
    CHECK(s(4) == 8);
}

TEST_CASE("arguments are passed through: references stay references, move-only values move", "[function]")
{
    InlineFunction<void(std::string&)> append = [](std::string& s) { s += "!"; };
    std::string s = "hi";
    append(s);
    CHECK(s == "hi!");
    InlineFunction<int(std::unique_ptr<int>)> take = [](std::unique_ptr<int> p) { return *p; };
    CHECK(take(std::make_unique<int>(7)) == 7);
}
