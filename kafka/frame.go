package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Frame errors. Each closes the connection: after a frame that cannot be
// parsed the stream position is trustworthy only if the size prefix was,
// and a client that sends garbage is not owed an answer.
var (
	// ErrFrameTooLarge: the size prefix is above Options.MaxFrameSize.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrFrameTruncated: the frame ends inside the request header or body.
	ErrFrameTruncated = errors.New("frame truncated")
	// ErrUnknownKey: no request type has the frame's API key.
	ErrUnknownKey = errors.New("unknown api key")
	// ErrUnsupportedVersion: the key is known but the version is outside
	// the advertised range (ApiVersions is answered instead, see KIP-511).
	ErrUnsupportedVersion = errors.New("unsupported api version")
)

// header is a request header, v1 or v2:
//
//	int16 api key | int16 api version | int32 correlation id
//	| nullable string client id (int16 length, never compact)
//	| tagged fields (v2 only: flexible versions of the request)
type header struct {
	key, version int16
	correlation  int32
	clientID     string
}

// minHeader is key, version and correlation id: a frame shorter than this
// cannot even be answered.
const minHeader = 8

// readFrame reads one size-prefixed frame into buf (grown as needed, from
// the buffer pool, a replaced buffer going back to it) and returns the
// frame's bytes, which alias the buffer it returns; buf is the function's
// from the call on.
func readFrame(r io.Reader, buf []byte, maxSize int) ([]byte, []byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, buf, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < minHeader {
		return nil, buf, fmt.Errorf("cannot read frame of %d bytes: %w", n, ErrFrameTruncated)
	}
	if int64(n) > int64(maxSize) {
		return nil, buf, fmt.Errorf("cannot read frame of %d bytes (max %d): %w", n, maxSize, ErrFrameTooLarge)
	}
	// The buffer grows with the bytes that arrive, not with the size the
	// prefix claims: a client that sends a 100 MiB prefix and nothing more
	// holds at most a chunk (doubling from 64 KiB) of memory. (Without this:
	// 16 such connections took 1.6 GiB.)
	buf = buf[:0]
	for len(buf) < int(n) {
		if cap(buf) == len(buf) {
			grown := getBuf(min(int(n), max(frameChunk, 2*cap(buf))))[:len(buf)]
			copy(grown, buf)
			putBuf(buf)
			buf = grown
		}
		// Never past this frame: what follows is the next one's.
		m, err := io.ReadFull(r, buf[len(buf):min(cap(buf), int(n))])
		buf = buf[:len(buf)+m]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, buf, err
		}
	}
	return buf[:n], buf, nil
}

// frameChunk is the first allocation for a frame larger than the buffer.
const frameChunk = 64 << 10

// parseRequest decodes a frame into its header and request. The request's
// byte fields (a produce's record batches) alias frame; strings are copies.
// A known key at an unsupported version returns the header, a nil request
// and ErrUnsupportedVersion, so ApiVersions can be answered (KIP-511).
func parseRequest(frame []byte) (header, kmsg.Request, error) {
	if len(frame) < minHeader {
		return header{}, nil, fmt.Errorf("cannot parse request header: %w", ErrFrameTruncated)
	}
	h := header{
		key:         int16(binary.BigEndian.Uint16(frame[0:])),
		version:     int16(binary.BigEndian.Uint16(frame[2:])),
		correlation: int32(binary.BigEndian.Uint32(frame[4:])),
	}
	r := kbin.Reader{Src: frame[minHeader:]}
	if cid := r.NullableString(); cid != nil {
		h.clientID = *cid
	}
	if !r.Ok() {
		return h, nil, fmt.Errorf("cannot parse client id: %w", ErrFrameTruncated)
	}
	req := kmsg.RequestForKey(h.key)
	if req == nil {
		return h, nil, fmt.Errorf("cannot parse request with key %d: %w", h.key, ErrUnknownKey)
	}
	if !supported(h.key, h.version) {
		return h, nil, fmt.Errorf("cannot parse %s v%d: %w", kmsg.NameForKey(h.key), h.version, ErrUnsupportedVersion)
	}
	req.SetVersion(h.version)
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return h, nil, fmt.Errorf("cannot parse header tags: %w", ErrFrameTruncated)
		}
	}
	if err := checkShape(h.key, h.version, r.Src); err != nil {
		return h, nil, err
	}
	if err := req.ReadFrom(r.Src); err != nil {
		return h, nil, fmt.Errorf("cannot parse %s v%d: %w: %w", kmsg.NameForKey(h.key), h.version, ErrFrameTruncated, err)
	}
	return h, req, nil
}

// appendResponse appends a size-prefixed response frame to dst. Response
// header v1 (a tag byte after the correlation id) goes with flexible
// versions, except for ApiVersions, whose response header is always v0 so
// that a client can read it before it knows what the broker supports.
func appendResponse(dst []byte, correlation int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = kbin.AppendInt32(dst, correlation)
	if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
