// cxx_caller.cpp - a C++ checkout server's view of the header: it must
// compile cleanly as C++ (extern "C", no C-only constructs) and link.
// Run without a server it only checks the pure functions.
#include <cstring>
#include <cstdio>

#include "reserve.h"
#include "reserve/migrate.h"

int main()
{
    rsv_options o;
    if (rsv_options_init(&o, RSV_OPTIONS_VERSION) != RSV_OK)
        return 1;
    if (std::strcmp(rsv_version(), RSV_VERSION) != 0)
        return 1;
    rsv_cart *cart = nullptr;
    if (rsv_cart_new(&cart) != RSV_OK)
        return 1;
    const uint64_t locs[] = {1, 2};
    int rc = rsv_cart_add(cart, 7, locs, 2, 3, RSV_LINE_SPLIT);
    rsv_cart_free(cart);
    int32_t stage = -1;
    if (rsv_migrate_stage(nullptr, 1, &stage) != RSV_EINVAL)
        return 1;
    rsv_migrate_close(nullptr);
    std::printf("cxx_caller: %s, cart_add=%s\n", rsv_version(), rsv_code_name(rc));
    return rc == RSV_OK ? 0 : 1;
}
