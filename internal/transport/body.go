package transport

// The buffers answers are read into, recycled.

import (
	"bytes"
	"io"
	"sync"
	"sync/atomic"
)

// maxPooledBody: a larger answer's buffer is left to the collector.
const maxPooledBody = 32 << 20

// bodies recycles the buffers answers are read into. No decoded object
// aliases one: generated protobuf code and encoding/json copy what they
// keep.
var bodies = sync.Pool{
	New: func() any { return new(bytes.Buffer) },
}

// GetBuffer takes a buffer of the pool; give it back with PutBuffer.
func GetBuffer() *bytes.Buffer {
	return bodies.Get().(*bytes.Buffer)
}

// PutBuffer gives buf back to the pool, unless it is too large to keep.
func PutBuffer(buf *bytes.Buffer) {
	if buf.Cap() <= maxPooledBody {
		bodies.Put(buf)
	}
}

// ReadBody reads body, of size bytes (-1: unknown), into a buffer of the
// pool, which the caller gives back with PutBuffer. An answer of unknown
// size (compressed: a list page) is expected to take what the last one
// took, last, which ReadBody then sets: not a chain of doublings.
func ReadBody(body io.Reader, size int64, last *atomic.Int64) (*bytes.Buffer, error) {
	buf := GetBuffer()
	buf.Reset()
	n := size
	unknown := size < 0
	if unknown {
		n = last.Load()
	}
	if n > 0 && n < maxPooledBody {
		// ReadFrom needs MinRead spare bytes to see the end
		buf.Grow(int(n) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(body)
	if err != nil {
		PutBuffer(buf)
		return nil, err
	}
	if unknown {
		last.Store(int64(buf.Len()))
	}
	return buf, nil
}
