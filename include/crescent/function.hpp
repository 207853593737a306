// crescent — std::function with room for its captures inside.
//
// std::function (libstdc++) stores a callable inside itself only when it fits
// in two pointers; an RPC continuation that captures `this`, a request number
// and a timestamp is allocated on the heap when the call is made and freed
// when the reply has run — on every call. InlineFunction keeps callables of up
// to `Room` bytes (the default holds six pointers) inside itself, as Seastar's
// noncopyable_function does, and takes the heap only for larger ones.
// Otherwise it is std::function: copyable (so are the callables it takes),
// empty when made from nullptr or an empty std::function, and calling an
// empty one throws std::bad_function_call.
//
//   InlineFunction<void(Reply&)> f = [this, n, at](Reply& r) { ... };
//   f(reply);
#pragma once

#include <cstddef>
#include <functional>
#include <new>
#include <type_traits>
#include <utility>

namespace crescent {

template <typename Signature, size_t Room = 48>
class InlineFunction;

namespace detail {
template <typename T>
struct IsStdFunction : std::false_type {};
template <typename S>
struct IsStdFunction<std::function<S>> : std::true_type {};
} // namespace detail

// A callable of signature R(Args...) with `Room` bytes inside for it.
template <typename R, typename... Args, size_t Room>
class InlineFunction<R(Args...), Room> {
    template <typename F>
    static constexpr bool kInline = sizeof(F) <= Room && alignof(F) <= alignof(std::max_align_t) &&
                                    std::is_nothrow_move_constructible_v<F>;

public:
    // Empty.
    InlineFunction() noexcept = default;
    // Empty.
    InlineFunction(std::nullptr_t) noexcept {}

    // Holds a copy of `f` (moved in when given an rvalue): inside when it fits
    // `Room` and moves without throwing, else on the heap.

    template <typename F, typename D = std::decay_t<F>,
              typename = std::enable_if_t<!std::is_same_v<D, InlineFunction> && !std::is_same_v<D, std::nullptr_t> &&
                                          std::is_copy_constructible_v<D> && std::is_invocable_r_v<R, D&, Args...>>>
    InlineFunction(F&& f) {
        // (A function named directly decays to a pointer that cannot be null.)
        if constexpr ((std::is_pointer_v<D> && !std::is_function_v<std::remove_reference_t<F>>) ||
                      std::is_member_pointer_v<D> || detail::IsStdFunction<D>::value) {
            if (f == nullptr) return;  // an empty std::function or a null pointer: empty, as std::function does
        }
        if constexpr (kInline<D>) {
            ::new (static_cast<void*>(buf_)) D(std::forward<F>(f));
            ops_ = &kInlineOps<D>;
        } else {
            *reinterpret_cast<D**>(buf_) = new D(std::forward<F>(f));
            ops_ = &kHeapOps<D>;
        }
    }

    // Takes o's callable (moved, or its heap pointer taken); o is left empty.
    InlineFunction(InlineFunction&& o) noexcept : ops_(o.ops_) {
        if (ops_) ops_->move(buf_, o.buf_);
        o.ops_ = nullptr;
    }
    // Drops the held callable, then takes o's; o is left empty.
    InlineFunction& operator=(InlineFunction&& o) noexcept {
        if (this != &o) {
            reset();
            ops_ = o.ops_;
            if (ops_) ops_->move(buf_, o.buf_);
            o.ops_ = nullptr;
        }
        return *this;
    }
    // Drops the held callable.
    InlineFunction& operator=(std::nullptr_t) noexcept {
        reset();
        return *this;
    }
    // A copy of o's callable (a new heap object when o's is on the heap).
    InlineFunction(const InlineFunction& o) : ops_(nullptr) {
        if (o.ops_) {
            o.ops_->copy(buf_, o.buf_);
            ops_ = o.ops_;
        }
    }
    // Drops the held callable, then holds a copy of o's.
    InlineFunction& operator=(const InlineFunction& o) {
        if (this != &o) *this = InlineFunction(o);
        return *this;
    }
    // Destroys the held callable (and frees it, on the heap).
    ~InlineFunction() { reset(); }

    // A callable is held.
    explicit operator bool() const noexcept { return ops_ != nullptr; }
    // No callable is held.
    friend bool operator==(const InlineFunction& f, std::nullptr_t) noexcept { return !f; }

    // Calls the callable (as a non-const lvalue, as std::function does);
    // std::bad_function_call when empty.
    R operator()(Args... args) const {
        if (!ops_) throw std::bad_function_call();
        return ops_->call(const_cast<unsigned char*>(buf_), std::forward<Args>(args)...);
    }

    // Whether the callable lives inside (no heap): for tests and the curious.
    bool is_inline() const noexcept { return ops_ != nullptr && ops_->inline_; }

private:
    struct Ops {
        R (*call)(void* self, Args&&... args);
        void (*move)(void* dst, void* src) noexcept;  // move-construct into dst, destroy src
        void (*copy)(void* dst, const void* src);     // copy-construct into dst
        void (*destroy)(void* self) noexcept;
        bool inline_;
    };

    template <typename D>
    static constexpr Ops kInlineOps{
        [](void* self, Args&&... args) -> R { return std::invoke(*static_cast<D*>(self), std::forward<Args>(args)...); },
        [](void* dst, void* src) noexcept {
            ::new (dst) D(std::move(*static_cast<D*>(src)));
            static_cast<D*>(src)->~D();
        },
        [](void* dst, const void* src) { ::new (dst) D(*static_cast<const D*>(src)); },
        [](void* self) noexcept { static_cast<D*>(self)->~D(); },
        true,
    };
    template <typename D>
    static constexpr Ops kHeapOps{
        [](void* self, Args&&... args) -> R { return std::invoke(**static_cast<D**>(self), std::forward<Args>(args)...); },
        [](void* dst, void* src) noexcept { *static_cast<D**>(dst) = *static_cast<D**>(src); },
        [](void* dst, const void* src) { *static_cast<D**>(dst) = new D(**static_cast<D* const*>(src)); },
        [](void* self) noexcept { delete *static_cast<D**>(self); },
        false,
    };

    void reset() noexcept {
        if (ops_) {
            const Ops* o = ops_;
            ops_ = nullptr;
            o->destroy(buf_);
        }
    }

    alignas(std::max_align_t) unsigned char buf_[Room];
    const Ops* ops_ = nullptr;
};

} // namespace crescent
