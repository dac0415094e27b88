package lifecycle

import "syscall"

const ioctlGetTermios = syscall.TCGETS
