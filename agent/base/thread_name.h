// Names the calling thread as `top -H`, `ps -L` and /proc/<pid>/task/<tid>/comm show it, so a
// daemon's threads can be told apart (and their CPU attributed). Linux keeps 15 characters.
#pragma once

#include <pthread.h>

namespace ad {

inline void NameThisThread(const char* name) { (void)::pthread_setname_np(::pthread_self(), name); }

}  // namespace ad
