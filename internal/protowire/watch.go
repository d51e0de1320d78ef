package protowire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// A protobuf watch is a stream of frames: a 4-byte big-endian length, then
// a metav1.WatchEvent of that length (field 1 the event's type, field 2 a
// runtime.RawExtension whose field 1 is the enveloped object).

// MaxFrame bounds a watch frame: a larger one is garbage, as etcd
// stores objects of up to 1.5 MiB.
const MaxFrame = 64 << 20

// FrameSize reads the next frame's length from r. Its error is io.EOF
// only if r ended cleanly before the frame.
func FrameSize(r io.Reader) (int, error) {
	var hdr [4]byte
	_, err := io.ReadFull(r, hdr[:])
	if err != nil {
		return 0, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n > MaxFrame {
		return 0, fmt.Errorf("frame of %d bytes is over the %d limit",
			n, MaxFrame)
	}
	return n, nil
}

// ReadFrame reads the frame of n bytes (FrameSize) from r into buf
// (reset first) and returns it, aliasing buf.
func ReadFrame(r io.Reader, n int, buf *bytes.Buffer) ([]byte, error) {
	buf.Reset()
	buf.Grow(n)
	frame := buf.AvailableBuffer()[:n]
	_, err := io.ReadFull(r, frame)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, fmt.Errorf("truncated frame of %d bytes: %w", n, err)
	}
	return frame, nil
}

// WatchEvent parses a frame, a metav1.WatchEvent, by hand so that nothing
// copies the object: its type ("ADDED"...) and its enveloped object.
func WatchEvent(frame []byte) (typ, object []byte, err error) {
	typ, errType := Field(frame, 1)
	ext, _ := Field(frame, 2)
	object, errObject := Field(ext, 1)
	err = errors.Join(errType, errObject)
	if err != nil {
		return nil, nil, err
	}
	return typ, object, nil
}
