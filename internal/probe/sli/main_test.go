package sli

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// writerEnv makes the test binary the O_DIRECT writer of the bio test:
// GALAGO_SLI_DIRECT_WRITER=<file>:<blocks>.
const writerEnv = "GALAGO_SLI_DIRECT_WRITER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(writerEnv); spec != "" {
		if err := directWriter(spec); err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// directWriter writes one warm-up block (its code and libraries are in
// memory afterwards: no read bio of its own later), says "ready", and on
// a line from stdin writes <blocks> blocks of 4 KiB with O_DIRECT, says
// "done" and waits for stdin to close.
func directWriter(spec string) error {
	var file string
	var blocks int
	for i := len(spec) - 1; i >= 0; i-- {
		if spec[i] == ':' {
			file = spec[:i]
			n, err := strconv.Atoi(spec[i+1:])
			if err != nil {
				return err
			}
			blocks = n
			break
		}
	}
	fd, err := unix.Open(file, unix.O_WRONLY|unix.O_DIRECT, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return err
	}
	write := func(i int) error {
		n, err := unix.Pwrite(fd, buf, int64(i)*4096)
		if err == nil && n != len(buf) {
			err = fmt.Errorf("short write %d", n)
		}
		return err
	}
	if err := write(0); err != nil {
		return err
	}
	in := bufio.NewScanner(os.Stdin)
	fmt.Println("ready")
	if !in.Scan() {
		return in.Err()
	}
	for i := range blocks {
		if err := write(i); err != nil {
			return err
		}
	}
	fmt.Println("done")
	for in.Scan() {
	}
	return nil
}
