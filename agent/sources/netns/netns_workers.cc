#include "sources/netns/netns_workers.h"

#include <unistd.h>

#include <exception>
#include <thread>
#include <utility>

#include "base/thread_name.h"

namespace ad {
namespace {

thread_local bool t_on_worker = false;

}  // namespace

struct NetnsWorkers::Worker {
  std::mutex mutex;
  std::condition_variable wake;
  std::condition_variable finished;
  const std::function<void()>* task = nullptr;  // set by the caller, cleared by the worker
  std::exception_ptr failure;
  bool stop = false;
  std::thread thread;  // last: starts after the fields it reads exist
};

NetnsWorkers& NetnsWorkers::Shared() {
  static NetnsWorkers pool;
  return pool;
}

NetnsWorkers::NetnsWorkers(size_t kept_idle) : kept_idle_(kept_idle), owner_(::getpid()) {}

NetnsWorkers::~NetnsWorkers() {
  std::vector<std::unique_ptr<Worker>> idle;
  {
    std::lock_guard lock(mutex_);
    idle.swap(idle_);
  }
  for (auto& worker : idle) {
    {
      std::lock_guard lock(worker->mutex);
      worker->stop = true;
    }
    worker->wake.notify_one();
    worker->thread.join();
  }
}

void NetnsWorkers::Loop(Worker* worker) {
  t_on_worker = true;
  std::unique_lock lock(worker->mutex);
  for (;;) {
    worker->wake.wait(lock, [worker] { return worker->stop || worker->task != nullptr; });
    if (worker->task == nullptr) return;  // stop, nothing pending
    const std::function<void()>* task = worker->task;
    lock.unlock();
    std::exception_ptr failure;
    try {
      (*task)();
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    worker->failure = std::move(failure);
    worker->task = nullptr;
    worker->finished.notify_one();
  }
}

std::unique_ptr<NetnsWorkers::Worker> NetnsWorkers::Acquire() {
  {
    std::lock_guard lock(mutex_);
    ++stats_.tasks;
    if (!idle_.empty()) {
      std::unique_ptr<Worker> worker = std::move(idle_.back());
      idle_.pop_back();
      return worker;
    }
    ++stats_.threads_started;
  }
  auto worker = std::make_unique<Worker>();
  Worker* raw = worker.get();
  raw->thread = std::thread([raw] {
    NameThisThread("ad-netns");
    Loop(raw);
  });
  return worker;
}

void NetnsWorkers::Release(std::unique_ptr<Worker> owned) {
  {
    std::lock_guard lock(mutex_);
    if (idle_.size() < kept_idle_) {
      idle_.push_back(std::move(owned));
      return;
    }
  }
  {
    std::lock_guard lock(owned->mutex);
    owned->stop = true;
  }
  owned->wake.notify_one();
  owned->thread.join();
}

void NetnsWorkers::Run(const std::function<void()>& task) { RunOnEach(1, task); }

void NetnsWorkers::RunOnEach(size_t copies, const std::function<void()>& task) {
  if (copies == 0) return;
  if (t_on_worker) {
    task();
    return;
  }
  if (::getpid() != owner_) {  // a forked child: the parent's workers do not exist here
    std::vector<std::jthread> threads;
    for (size_t i = 0; i < copies; ++i) threads.emplace_back(task);
    return;
  }
  std::vector<std::unique_ptr<Worker>> workers;
  workers.reserve(copies);
  for (size_t i = 0; i < copies; ++i) {
    std::unique_ptr<Worker> worker = Acquire();
    {
      std::lock_guard lock(worker->mutex);
      worker->task = &task;
    }
    worker->wake.notify_one();
    workers.push_back(std::move(worker));
  }
  std::exception_ptr failure;
  for (std::unique_ptr<Worker>& worker : workers) {
    {
      std::unique_lock lock(worker->mutex);
      Worker* raw = worker.get();
      worker->finished.wait(lock, [raw] { return raw->task == nullptr; });
      if (worker->failure && !failure) failure = std::exchange(worker->failure, nullptr);
      worker->failure = nullptr;
    }
    Release(std::move(worker));
  }
  if (failure) std::rethrow_exception(failure);
}

NetnsWorkers::Stats NetnsWorkers::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace ad
