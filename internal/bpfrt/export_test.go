package bpfrt

// SetBeforePark makes r call f each time a drain found the ring empty,
// before it parks: the window in which a wake-up must not be lost.
func SetBeforePark(r *Reader, f func()) { r.beforePark = f }
