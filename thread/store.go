package thread

// keeps returns the filter i stands for, or nil for every thread.
func keeps(i Internal) func(*Record) bool {
	switch i {
	case InternalExclude:
		return func(r *Record) bool { return !Own(r) }
	case InternalOnly:
		return Own
	}
	return nil
}
