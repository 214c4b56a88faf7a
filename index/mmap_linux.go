package index

import "syscall"

// mapPopulate asks the kernel to map every page at once: one call instead
// of a fault per page on the first scan.
const mapPopulate = syscall.MAP_POPULATE
