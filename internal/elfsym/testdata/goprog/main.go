// goprog is a Go program with crypto/tls's Conn.Read and Conn.Write in
// it, for the symbol finder's tests (built by them, stripped and not).
package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		return
	}
	nc, err := net.Dial("tcp", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c := tls.Client(nc, &tls.Config{InsecureSkipVerify: true})
	_, _ = c.Write([]byte("x"))
	_, _ = c.Read(make([]byte, 1))
}
