//go:build unix && !linux

package index

// mapPopulate is 0 where MAP_POPULATE does not exist: pages fault in as
// they are read.
const mapPopulate = 0
