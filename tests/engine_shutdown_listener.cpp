// engine_shutdown_listener.cpp: linked into every Catch2 test program. When the test run ends,
// the engine shuts down as tapedeck's main does after lua_close: the spare nodes and the storage
// pool's cached blocks are freed (engine_release_spares). The engine's singletons are immortal,
// so nothing of it is destroyed after main returns.
#define CATCH_CONFIG_EXTERNAL_INTERFACES   // TestEventListenerBase, CATCH_REGISTER_LISTENER
#include <catch2/catch.hpp>

#include "tape.h"

namespace {

struct EngineShutdownListener : Catch::TestEventListenerBase {
    using TestEventListenerBase::TestEventListenerBase;
    void testRunEnded(const Catch::TestRunStats&) override { td::engine_release_spares(); }
};

}  // namespace

CATCH_REGISTER_LISTENER(EngineShutdownListener)
