package ledger

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestDecodeEventRejectsFields covers the rows of docs/bad-input.md that
// TestDecodeEventRejects does not: each field check of ValidateEvent, through
// DecodeEvent, with its sentinel and the words of its message.
func TestDecodeEventRejectsFields(t *testing.T) {
	t.Parallel()
	good, err := EncodeEvent(testEvent())
	if err != nil {
		t.Fatal(err)
	}
	edit := func(old, new string) string {
		if !bytes.Contains(good, []byte(old)) {
			t.Fatalf("test setup: %q not in %s", old, good)
		}
		return strings.Replace(string(good), old, new, 1)
	}
	manifest := `"manifest":"` + DigestOf([]byte("m")).String() + `"`
	tests := []struct {
		name, in string
		want     error
		msg      string
	}{
		{"empty host", edit(`"host":"writer"`, `"host":""`), ErrInvalid, "host must be 1-256 bytes"},
		{"long host", edit(`"host":"writer"`, `"host":"`+strings.Repeat("h", 257)+`"`), ErrInvalid, "host must be 1-256 bytes"},
		{"no time", edit(`"at":"2026-11-29T10:00:00.123456789Z",`, ``), ErrInvalid, "no time"},
		{"long message", edit(`"message":"run vpc"`, `"message":"`+strings.Repeat("m", MaxMessageLen+1)+`"`), ErrTooLarge, "limit 65536"},
		{"empty partition", edit(`"partition":"data--aws--ec2--vpc--abc"`, `"partition":""`), ErrInvalid, "empty partition"},
		{"partition token too long", edit(`"partition":"data--aws--ec2--vpc--abc"`, `"partition":"`+strings.Repeat(".", MaxTokenLen/3+1)+`"`), ErrTooLarge, "escapes to more than 2048 bytes"},
		{"modelSeq 7 with prev 0", edit(`"prev":1234`, `"prev":0`), ErrInvalid, "modelSeq 7 with prev 0"},
		{"parts 0", edit(`"parts":3`, `"parts":0`), ErrInvalid, "parts 0 outside 1..1000"},
		{"parts 1001", edit(`"parts":3`, `"parts":1001`), ErrInvalid, "parts 1001 outside 1..1000"},
		{"part 0", edit(`"part":1`, `"part":0`), ErrInvalid, "part 0 outside 1..3"},
		{"entries and manifest", edit(`"parts":3`, manifest+`,"parts":3`), ErrInvalid, "want entries or a manifest, exactly one"},
		{"zero manifest", edit(`"parts":3`, `"manifest":"`+strings.Repeat("0", 64)+`","parts":3`), ErrInvalid, "zero manifest digest"},
		{"bad commit uuid", edit(testCommit, "x"), ErrInvalid, `commit "x" is not a uuid`},
		{"upper-case digest", edit(DigestOf([]byte("x")).String(), strings.ToUpper(DigestOf([]byte("x")).String())), ErrInvalid, "not lower-case hex"},
		{"control byte in path", edit(`state/1/old`, `state/1/o\u0001d`), ErrInvalid, "control byte 0x01"},
		{"long path", edit(`state/1/old`, strings.Repeat("x/", MaxPathLen/2)+"y"), ErrTooLarge, "limit 4096"},
		{"long segment", edit(`state/1/old`, `state/1/`+strings.Repeat("o", MaxNameLen+1)), ErrTooLarge, "a segment of 256 bytes, limit 255"},
		{"ignore file as a directory", edit(`data/aws/ec2/vpc/abc/state/1/old`, `.syncledgerignore/x`), ErrInvalid, ".syncledgerignore as a directory"},
		{"state directory in other case", edit(`data/aws/ec2/vpc/abc/state/1/old`, `.SyncLedger/state.db`), ErrInvalid, "inside .syncledger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeEvent([]byte(tt.in))
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("DecodeEvent = %v, want %v saying %q", err, tt.want, tt.msg)
			}
		})
	}
}
