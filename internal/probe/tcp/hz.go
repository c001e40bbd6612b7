package tcp

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// parseHZ finds CONFIG_HZ in kernel config text.
func parseHZ(r io.Reader) (uint32, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "CONFIG_HZ=")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
		if err != nil || n == 0 {
			return 0, fmt.Errorf("bad CONFIG_HZ %q", v)
		}
		return uint32(n), nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no CONFIG_HZ in kernel config")
}

// kernelHZ reads CONFIG_HZ from /proc/config.gz or /boot/config-<release>,
// which the rto and ato fields (kept in jiffies by the kernel) need.
func kernelHZ() (uint32, error) {
	var errs []error
	if f, err := os.Open("/proc/config.gz"); err == nil {
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err == nil {
			hz, err := parseHZ(zr)
			if err == nil {
				return hz, nil
			}
			errs = append(errs, fmt.Errorf("/proc/config.gz: %w", err))
		} else {
			errs = append(errs, fmt.Errorf("/proc/config.gz: %w", err))
		}
	} else {
		errs = append(errs, err)
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		path := "/boot/config-" + unix.ByteSliceToString(u.Release[:])
		f, err := os.Open(path)
		if err == nil {
			defer f.Close()
			hz, err := parseHZ(f)
			if err == nil {
				return hz, nil
			}
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
		} else {
			errs = append(errs, err)
		}
	}
	return 0, errors.Join(errs...)
}
