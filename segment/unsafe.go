package segment

import "unsafe"

// unsafeSlice reinterprets a slice of one fixed-size integer type as another
// of the same size (INT64 pages holding UINT64 values, INT32 holding UINT32).
func unsafeSlice[From, To int32 | uint32 | int64 | uint64](s []From) []To {
	if len(s) == 0 {
		return nil
	}
	var f From
	var t To
	if unsafe.Sizeof(f) != unsafe.Sizeof(t) {
		panic("segment: unsafeSlice between types of different sizes")
	}
	return unsafe.Slice((*To)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}
