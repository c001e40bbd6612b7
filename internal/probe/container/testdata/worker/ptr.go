package main

import (
	"syscall"
	"unsafe"
)

func unsafePointer(p *syscall.Timespec) unsafe.Pointer { return unsafe.Pointer(p) }
