package jsonguard_test

import (
	"errors"
	"fmt"

	"github.com/loomthreads/loom/internal/jsonguard"
)

func ExampleCheck() {
	fmt.Println(jsonguard.Check([]byte(`{"text":"ok"}`), 64))
	err := jsonguard.Check([]byte(`{"text":"\udc00"}`), 64)
	fmt.Println(err, errors.Is(err, jsonguard.ErrUTF8))
	fmt.Println(jsonguard.Check([]byte(`[[[1]]]`), 2))
	// Output:
	// <nil>
	// text is not valid UTF-8 (at byte 9) true
	// JSON nested deeper than 2 levels (at byte 2)
}
