package message

// MarshalSlow is the encoding/json reference of MarshalJSON, for the
// benchmarks of package message_test.
func MarshalSlow(m Message) ([]byte, error) { return m.marshalSlow() }
