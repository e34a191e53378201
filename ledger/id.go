package ledger

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"time"
)

// NewUUIDv7 returns a UUID version 7 (RFC 9562): 48 bits of Unix milliseconds from
// now, then random bits read from rnd (crypto/rand.Reader in production). Commit ids
// are v7 so they sort by creation time.
func NewUUIDv7(now time.Time, rnd io.Reader) (string, error) {
	var u [16]byte
	if _, err := io.ReadFull(rnd, u[6:]); err != nil {
		return "", fmt.Errorf("new uuid: %w", err)
	}
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(now.UnixMilli()))
	copy(u[:6], ms[2:])
	u[6] = 0x70 | u[6]&0x0f // version 7
	u[8] = 0x80 | u[8]&0x3f // variant 10
	return formatUUID(u), nil
}

// NewUUIDv4 returns a random UUID (ledger lineage ids).
func NewUUIDv4(rnd io.Reader) (string, error) {
	var u [16]byte
	if _, err := io.ReadFull(rnd, u[:]); err != nil {
		return "", fmt.Errorf("new uuid: %w", err)
	}
	u[6] = 0x40 | u[6]&0x0f
	u[8] = 0x80 | u[8]&0x3f
	return formatUUID(u), nil
}

func formatUUID(u [16]byte) string {
	h := hex.EncodeToString(u[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
