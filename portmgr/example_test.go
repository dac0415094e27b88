package portmgr_test

import (
	"context"
	"fmt"
	"net"

	"github.com/mcpkeep/mcpkeep/portmgr"
)

// Bind a port for a project: the same key tends to give the same port
// across restarts, and the listener is already bound when Listen returns.
func ExampleListen() {
	ln, err := portmgr.Listen(context.Background(), portmgr.Options{Key: "/home/me/project"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ln.Close()
	addr := ln.Addr().(*net.TCPAddr)
	fmt.Println(addr.IP, addr.Port > 0)
	// Output: 127.0.0.1 true
}
