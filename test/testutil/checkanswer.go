package testutil

import (
	"io"
	"strings"
)

// WriteHugeCheckAnswer writes a Prometheus query answer of about mib MiB: valid JSON whose value (0) would pass a
// canary's check were it read whole, padded to that size. It stops at the first failed write (the reader gave up).
func WriteHugeCheckAnswer(w io.Writer, mib int) {
	_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"scalar","result":[1,"0"]},"pad":"`)
	chunk := strings.Repeat("x", 64<<10)
	for range mib * 16 {
		if _, err := io.WriteString(w, chunk); err != nil {
			return
		}
	}
	_, _ = io.WriteString(w, `"}`)
}
