package batch

import (
	"encoding/binary"
	"fmt"
)

// Validate checks that b is exactly one well-formed batch that a log may
// hold, and returns it as a Batch. In order: framing (size >= 61, batchLength
// matches len(b)), magic 2, size <= maxSize, CRC-32C, codec, record count,
// control-batch shape. maxSize <= 0 means DefaultMaxBatchSize.
//
// The record-count rule is the one stored batches obey: recordsCount <=
// lastOffsetDelta+1, because compaction may drop records (even all of them)
// while keeping the batch's offset span. ValidateProduce applies the stricter
// rule for client appends. Records are not decoded here: Decoder.CheckRecords
// does that for a client's batch.
func Validate(b []byte, maxSize int) (Batch, error) { return validate(b, maxSize, true) }

func validate(b []byte, maxSize int, checkCRC bool) (Batch, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxBatchSize
	}
	n, err := Size(b)
	if err != nil {
		return nil, err
	}
	if n != len(b) {
		return nil, fmt.Errorf("cannot validate batch: %d bytes given, header says %d: %w", len(b), n, ErrLengthMismatch)
	}
	v := Batch(b)
	if v.Magic() != Magic {
		return nil, fmt.Errorf("cannot validate batch: magic %d: %w", v.Magic(), ErrMagic)
	}
	if n > maxSize {
		return nil, fmt.Errorf("cannot validate batch: %d bytes, limit %d: %w", n, maxSize, ErrTooLarge)
	}
	if checkCRC {
		if stored, computed := v.CRC(), v.ComputeCRC(); stored != computed {
			return nil, fmt.Errorf("cannot validate batch: crc %08x, computed %08x: %w", stored, computed, ErrCRC)
		}
	}
	return v, v.checkBody()
}

// checkBody checks the CRC-covered fields that the CRC cannot vouch for.
func (b Batch) checkBody() error {
	if c := b.Codec(); c > CodecZstd {
		return fmt.Errorf("cannot validate batch: %v: %w", c, ErrCodec)
	}
	count, delta := b.RecordsCount(), b.LastOffsetDelta()
	if count < 0 || delta < 0 || int64(count) > int64(delta)+1 {
		return fmt.Errorf("cannot validate batch: %d records, last offset delta %d: %w", count, delta, ErrRecordCount)
	}
	if b.Codec() == CodecNone && int64(count)*minRecordSize > int64(len(b.Records())) {
		return fmt.Errorf("cannot validate batch: %d records in %d bytes: %w", count, len(b.Records()), ErrRecordCount)
	}
	if b.IsControl() {
		return b.checkControl()
	}
	return nil
}

// ValidateProduce validates b as a client append: everything Validate
// checks, then Kafka's produce rules: baseOffset 0, at least one record and
// lastOffsetDelta+1 == recordsCount, no control batch, and a base sequence
// whenever there is a producer id.
func ValidateProduce(b []byte, maxSize int) (Batch, error) { return validateProduce(b, maxSize, true) }

// ValidateBuilt is ValidateProduce for a batch this process's Builder has
// just sealed and nobody else has touched: every check but the CRC-32C,
// which Build computed over these very bytes a moment ago. Recomputing it
// was about a tenth of an in-process producer's CPU (bench-axes profile).
// Bytes from outside the process must go through ValidateProduce.
func ValidateBuilt(b []byte, maxSize int) (Batch, error) { return validateProduce(b, maxSize, false) }

func validateProduce(b []byte, maxSize int, checkCRC bool) (Batch, error) {
	v, err := validate(b, maxSize, checkCRC)
	if err != nil {
		return nil, err
	}
	if off := v.BaseOffset(); off != 0 {
		return nil, fmt.Errorf("cannot accept batch: base offset %d: %w", off, ErrBaseOffset)
	}
	if v.RecordsCount() == 0 {
		return nil, fmt.Errorf("cannot accept batch: %w", ErrEmpty)
	}
	if int64(v.RecordsCount()) != int64(v.LastOffsetDelta())+1 {
		return nil, fmt.Errorf("cannot accept batch: %d records, last offset delta %d: %w",
			v.RecordsCount(), v.LastOffsetDelta(), ErrRecordCount)
	}
	if v.IsControl() {
		return nil, fmt.Errorf("cannot accept batch: %w", ErrClientControl)
	}
	if v.HasProducerID() && v.BaseSequence() < 0 {
		return nil, fmt.Errorf("cannot accept batch: producer %d, base sequence %d: %w",
			v.ProducerID(), v.BaseSequence(), ErrSequence)
	}
	return v, nil
}

// CheckRecords decodes every record of a client batch that passed
// ValidateProduce, as Kafka's LogValidator does before it appends one: each
// record parses (ErrRecord: a bad varint, a length past the section, bytes
// left over), there are exactly recordsCount of them, and their offset
// deltas run 0, 1, 2, ... (ErrOffsetDelta), so a reader's offsets are the
// batch's. A compressed section is inflated into d's buffer, within d's
// limit (ErrDecompress, ErrInflateLimit). An uncompressed batch needs no
// buffer: d may then be nil. It allocates nothing for an uncompressed batch
// (nor, once d's buffers have grown, for a compressed one) unless it fails.
func (d *Decoder) CheckRecords(b Batch) error {
	_, err := d.CheckRecordsMaxTimestamp(b)
	return err
}

// CheckRecordsMaxTimestamp is CheckRecords that also returns the largest
// timestamp of the batch's records (-1 without records), which Kafka's
// validator writes into a CreateTime batch's header when the producer's
// differs (SetCreateTime).
func (d *Decoder) CheckRecordsMaxTimestamp(b Batch) (int64, error) {
	if d == nil && b.Codec() != CodecNone {
		panic("BUG: batch: CheckRecords of a compressed batch without a Decoder")
	}
	it, err := d.Records(b)
	if err != nil {
		return -1, err
	}
	var r Record
	maxTs := int64(-1)
	for i := int32(0); it.Next(&r); i++ {
		if r.OffsetDelta != i {
			return -1, fmt.Errorf("cannot accept batch: record %d has offset delta %d: %w", i, r.OffsetDelta, ErrOffsetDelta)
		}
		maxTs = max(maxTs, r.Timestamp)
	}
	if err := it.Err(); err != nil {
		return -1, fmt.Errorf("cannot accept batch: %w", err)
	}
	return maxTs, nil
}

// ControlType is the type of a control record (the second int16 of its key).
type ControlType int16

const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
	// Types 2..6 are KRaft's; any other value is unknown and ignored.
)

func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "ABORT"
	case ControlCommit:
		return "COMMIT"
	}
	return fmt.Sprintf("CONTROL(%d)", int16(t))
}

// Control is the decoded record of a control batch.
type Control struct {
	Type    ControlType
	Version int16
	// CoordinatorEpoch is set for COMMIT and ABORT markers.
	CoordinatorEpoch int32
}

// checkControl enforces the shape of a control batch: uncompressed, at most
// one record (zero after compaction), and a record that parses as a control
// record. COMMIT and ABORT markers must also be transactional.
func (b Batch) checkControl() error {
	if b.Codec() != CodecNone {
		return fmt.Errorf("cannot validate control batch: compressed with %v: %w", b.Codec(), ErrControl)
	}
	switch b.RecordsCount() {
	case 0:
		return nil
	case 1:
	default:
		return fmt.Errorf("cannot validate control batch: %d records: %w", b.RecordsCount(), ErrControl)
	}
	c, err := b.Control()
	if err != nil {
		return err
	}
	if (c.Type == ControlAbort || c.Type == ControlCommit) && !b.IsTransactional() {
		return fmt.Errorf("cannot validate control batch: %v marker not transactional: %w", c.Type, ErrControl)
	}
	return nil
}

// Control decodes the record of a control batch with one record.
func (b Batch) Control() (Control, error) {
	var r Record
	n, err := readRecord(b.Records(), &r)
	if err != nil {
		return Control{}, fmt.Errorf("cannot read control record: %v: %w", err, ErrControl)
	}
	if n != len(b.Records()) {
		return Control{}, fmt.Errorf("cannot read control record: %d trailing bytes: %w", len(b.Records())-n, ErrControl)
	}
	if len(r.Key) < 4 {
		return Control{}, fmt.Errorf("cannot read control record: key of %d bytes: %w", len(r.Key), ErrControl)
	}
	c := Control{
		Version: int16(binary.BigEndian.Uint16(r.Key)),
		Type:    ControlType(binary.BigEndian.Uint16(r.Key[2:])),
	}
	if c.Version < 0 {
		return Control{}, fmt.Errorf("cannot read control record: key version %d: %w", c.Version, ErrControl)
	}
	if c.Type == ControlAbort || c.Type == ControlCommit {
		if len(r.Value) < 6 {
			return Control{}, fmt.Errorf("cannot read %v marker: value of %d bytes: %w", c.Type, len(r.Value), ErrControl)
		}
		if v := int16(binary.BigEndian.Uint16(r.Value)); v < 0 {
			return Control{}, fmt.Errorf("cannot read %v marker: value version %d: %w", c.Type, v, ErrControl)
		}
		c.CoordinatorEpoch = int32(binary.BigEndian.Uint32(r.Value[2:]))
	}
	return c, nil
}
