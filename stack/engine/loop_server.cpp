// crescent — the non-blocking stream server on engine 0's epoll set that the
// control socket and the metrics endpoint share (see loop_server.hpp).
#include "stack/engine/loop_server.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace crescent::engine {

LoopServer::~LoopServer() {
    for (auto& [fd, c] : clients_) ::close(fd);
    if (lfd_ >= 0) ::close(lfd_);
}

bool LoopServer::attach(Engine& e0, std::vector<Engine*> engines) {
    e0_ = &e0;
    engines_ = std::move(engines);
    if (!e0.add_fd(lfd_, EPOLLIN, [this](uint32_t) { on_accept(); })) return false;
    attached_ = true;
    stop_hook_ = e0.at_stop([this] { detach(); });
    return true;
}

void LoopServer::detach() {
    if (!attached_) return;
    attached_ = false;
    e0_->cancel_at_stop(stop_hook_);  // no-op when the hook is what runs this
    for (auto& [fd, c] : clients_) {
        e0_->remove_fd(fd);
        ::close(fd);
    }
    clients_.clear();
    e0_->remove_fd(lfd_);
}

void LoopServer::on_accept() {
    for (;;) {
        int fd = ::accept4(lfd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;  // EAGAIN (or a client that left already)
        if (clients_.size() >= kMaxClients ||
            !e0_->add_fd(fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, [this, fd](uint32_t ev) { on_client(fd, ev); })) {
            ++dropped_;
            ::close(fd);
            continue;
        }
        clients_.emplace(fd, Client{});
    }
}

void LoopServer::close_client(int fd) {
    e0_->remove_fd(fd);
    ::close(fd);
    clients_.erase(fd);
}

LoopServer::Flush LoopServer::flush(int fd, Client& c) {
    while (!c.out.empty()) {
        ssize_t n = ::send(fd, c.out.data(), c.out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            c.out.erase(0, size_t(n));
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Flush::Again;  // EPOLLOUT (edge) resumes
        return Flush::Failed;
    }
    return Flush::Done;
}

void LoopServer::on_client(int fd, uint32_t events) {
    auto it = clients_.find(fd);
    if (it == clients_.end()) return;
    Client& c = it->second;
    if (events & EPOLLERR) return close_client(fd);
    bool eof = false;
    char buf[4096];
    for (;;) {  // edge-triggered: read until EAGAIN
        ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            if (!c.answered) c.in.append(buf, size_t(n));
            continue;
        }
        if (n == 0) eof = true;
        else if (errno != EAGAIN && errno != EWOULDBLOCK) return close_client(fd);
        break;
    }
    on_input(fd, c, events, eof);
}

} // namespace crescent::engine
