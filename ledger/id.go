package ledger

import (
	"fmt"
	"io"

	"github.com/google/uuid"
)

// NewCommitID returns a new commit id: a UUID version 7 (RFC 9562, made by
// github.com/google/uuid), whose first 48 bits are the Unix time in milliseconds
// and whose next 12 count within the millisecond, so the ids one process makes
// sort by creation time. rnd supplies the random bits (crypto/rand.Reader in
// production).
func NewCommitID(rnd io.Reader) (string, error) {
	u, err := uuid.NewV7FromReader(rnd)
	if err != nil {
		return "", fmt.Errorf("new commit id: %w", err)
	}
	return u.String(), nil
}

// NewLineageID returns a new ledger lineage id: a random UUID (version 4).
func NewLineageID(rnd io.Reader) (string, error) {
	u, err := uuid.NewRandomFromReader(rnd)
	if err != nil {
		return "", fmt.Errorf("new ledger id: %w", err)
	}
	return u.String(), nil
}
