package ledger

import (
	"bytes"
	"encoding/hex"
	"strconv"
	"unicode/utf8"
)

// decodeEventFast decodes the exact form EncodeEvent writes — json.Marshal of
// wireEvent: fields in declaration order, optional ones omitted when empty, no
// whitespace — and reports whether it did. It is a fast path only: anything it
// does not recognise, and any event that would fail validation, is left to the
// strict decoder (ok false), which either decodes it or explains the error. So
// it accepts a subset of what the strict decoder accepts, and returns what the
// strict decoder would return for it (FuzzFastDecodeAgrees checks both).
//
// A replay spends most of its client time decoding events; this reads one in
// about a tenth of the time encoding/json needs.
func decodeEventFast(b []byte) (e Event, ok bool) {
	return decodeEventFastIn(nil, b)
}

// decodeEventFastIn is decodeEventFast sharing strings through strs (nil: none).
func decodeEventFastIn(strs *interner, b []byte) (e Event, ok bool) {
	d := fastDec{b: b, ok: true, strs: strs}
	d.lit(`{"v":`)
	e.V = int(d.uint(1<<31 - 1))
	d.lit(`,"ledger":`)
	e.Ledger = d.str()
	d.lit(`,"commit":`)
	e.Commit = d.strIn(nil) // unique to a commit: not worth keeping
	d.lit(`,"host":`)
	e.Host = d.str()
	d.lit(`,"at":`)
	if d.ok {
		start := d.i
		d.rawStr()
		if d.ok && e.At.UnmarshalJSON(b[start:d.i]) != nil {
			d.ok = false
		}
	}
	if d.opt(`,"message":`) {
		if e.Message = d.strIn(nil); e.Message == "" {
			d.ok = false // omitempty never writes it empty
		}
	}
	d.lit(`,"partition":`)
	e.Partition = d.str()
	d.lit(`,"modelSeq":`)
	e.ModelSeq = d.uint(1<<64 - 1)
	d.lit(`,"prev":`)
	e.Prev = Seq(d.uint(1<<64 - 1))
	d.lit(`,"parts":`)
	e.Parts = int(d.uint(1<<31 - 1))
	d.lit(`,"part":`)
	e.Part = int(d.uint(1<<31 - 1))
	if d.opt(`,"entries":[`) {
		e.Entries = d.entries()
	} else {
		e.Entries = make([]Entry, 0) // as the strict decoder returns it
	}
	if d.opt(`,"manifest":`) {
		if e.Manifest = d.digest(); e.Manifest.IsZero() {
			d.ok = false
		}
	}
	d.lit(`}`)
	if !d.ok || d.i != len(b) {
		return Event{}, false
	}
	if validateHeader(e) != nil || validateEntries(e.Entries) != nil || CheckEntriesPartition(e.Partition, e.Entries) != nil {
		return Event{}, false
	}
	return e, true
}

// fastDec is a cursor over one encoded event. Once ok is false every method is
// a no-op, so a decoder reads straight through and checks ok at the end.
type fastDec struct {
	b    []byte
	i    int
	ok   bool
	strs *interner
}

// lit consumes s exactly.
func (d *fastDec) lit(s string) {
	if !d.ok {
		return
	}
	if !bytes.HasPrefix(d.b[d.i:], []byte(s)) {
		d.ok = false
		return
	}
	d.i += len(s)
}

// opt consumes s if the input continues with it.
func (d *fastDec) opt(s string) bool {
	if !d.ok || !bytes.HasPrefix(d.b[d.i:], []byte(s)) {
		return false
	}
	d.i += len(s)
	return true
}

// uint reads a non-negative integer without sign, fraction or exponent, at
// most max (what the strict decoder reads into the field's type).
func (d *fastDec) uint(max uint64) uint64 {
	if !d.ok {
		return 0
	}
	j := d.i
	for j < len(d.b) && '0' <= d.b[j] && d.b[j] <= '9' {
		j++
	}
	if j == d.i || j-d.i > 20 || (d.b[d.i] == '0' && j-d.i > 1) {
		d.ok = false
		return 0
	}
	v, err := strconv.ParseUint(string(d.b[d.i:j]), 10, 64)
	if err != nil || v > max {
		d.ok = false
		return 0
	}
	d.i = j
	return v
}

// rawStr skips a string with no escape, no control character and valid UTF-8.
func (d *fastDec) rawStr() (start, end int) {
	if !d.ok || d.i >= len(d.b) || d.b[d.i] != '"' {
		d.ok = false
		return 0, 0
	}
	start = d.i + 1
	k := bytes.IndexByte(d.b[start:], '"')
	if k < 0 {
		d.ok = false
		return 0, 0
	}
	end = start + k
	ascii := true
	for _, c := range d.b[start:end] {
		if c == '\\' || c < 0x20 {
			d.ok = false
			return 0, 0
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if !ascii && !utf8.Valid(d.b[start:end]) {
		d.ok = false // the strict decoder substitutes U+FFFD
		return 0, 0
	}
	d.i = end + 1
	return start, end
}

// str reads a string value, shared through the decoder's interner.
func (d *fastDec) str() string { return d.strIn(d.strs) }

// strIn reads a string value. Escapes are left to the strict decoder, except
// those json.Marshal writes for ordinary text (<, >, &, quotes, backslashes,
// control characters), which are common enough in paths and messages to keep
// on the fast path.
func (d *fastDec) strIn(strs *interner) string {
	if !d.ok {
		return ""
	}
	j := d.i
	if j < len(d.b) && d.b[j] == '"' {
		k := bytes.IndexByte(d.b[j+1:], '"')
		if k >= 0 && bytes.IndexByte(d.b[j+1:j+1+k], '\\') >= 0 {
			return d.escapedStr()
		}
	}
	start, end := d.rawStr()
	if !d.ok {
		return ""
	}
	return strs.get(d.b[start:end])
}

// escapedStr reads a string holding escapes: the simple ones and \uXXXX outside
// the surrogate range.
func (d *fastDec) escapedStr() string {
	out := make([]byte, 0, 64)
	j := d.i + 1
	for j < len(d.b) {
		c := d.b[j]
		switch {
		case c == '"':
			if !utf8.Valid(out) {
				d.ok = false
				return ""
			}
			d.i = j + 1
			return string(out)
		case c < 0x20:
			d.ok = false
			return ""
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(d.b) {
			d.ok = false
			return ""
		}
		switch e := d.b[j+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if j+6 > len(d.b) {
				d.ok = false
				return ""
			}
			var h [2]byte
			if _, err := hex.Decode(h[:], d.b[j+2:j+6]); err != nil {
				d.ok = false
				return ""
			}
			r := rune(h[0])<<8 | rune(h[1])
			if utf8.RuneLen(r) < 0 { // a surrogate: left to the strict decoder
				d.ok = false
				return ""
			}
			out = utf8.AppendRune(out, r)
			j += 6
			continue
		default:
			d.ok = false
			return ""
		}
		j += 2
	}
	d.ok = false
	return ""
}

// digest reads a lower-case hex SHA-256 string.
func (d *fastDec) digest() Digest {
	var g Digest
	start, end := d.rawStr()
	if !d.ok {
		return g
	}
	s := d.b[start:end]
	if len(s) != 2*len(g) {
		d.ok = false
		return g
	}
	for i := range g {
		hi, lo := hexVal[s[2*i]], hexVal[s[2*i+1]]
		if hi|lo > 0xf {
			d.ok = false
			return g
		}
		g[i] = hi<<4 | lo
	}
	return g
}

// hexVal maps a lower-case hex digit to its value, and any other byte to 0xff.
var hexVal = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, c := range "0123456789abcdef" {
		t[c] = byte(i)
	}
	return t
}()

// entries reads the entries array after its opening bracket, through the
// closing one.
func (d *fastDec) entries() []Entry {
	var es []Entry
	for d.ok {
		if len(es) > 0 {
			d.lit(`,`)
		}
		var e Entry
		d.lit(`{"path":`)
		e.Path = d.str()
		if d.opt(`,"sha256":`) {
			e.SHA256 = d.digest()
			d.lit(`,"size":`)
			e.Size = int64(d.uint(1<<63 - 1))
			d.lit(`,"mode":`)
			e.Mode = uint32(d.uint(1<<32 - 1))
		} else {
			d.lit(`,"deleted":true`)
			e.Deleted = true
		}
		d.lit(`}`)
		es = append(es, e)
		if d.opt(`]`) {
			return es
		}
	}
	return nil
}

// Decoder decodes events as DecodeEvent does, sharing the strings that repeat
// from one event of a log to the next (ledger, host, partition, paths) instead
// of allocating each again: a long replay allocates, and collects, less. Its
// memory is bounded (maxInterned strings of at most maxInternLen bytes). A
// Decoder is for one goroutine at a time; the zero value is ready to use.
type Decoder struct {
	strs interner
}

// Decode is DecodeEvent.
func (d *Decoder) Decode(b []byte) (Event, error) {
	if len(b) > MaxEventSize {
		return DecodeEvent(b)
	}
	if e, ok := decodeEventFastIn(&d.strs, b); ok {
		return e, nil
	}
	return decodeEventStrict(b)
}

const (
	maxInterned  = 1 << 14
	maxInternLen = 512
)

// interner shares strings; a nil interner allocates each.
type interner struct {
	m map[string]string
}

func (in *interner) get(b []byte) string {
	if in == nil || len(b) > maxInternLen {
		return string(b)
	}
	if s, ok := in.m[string(b)]; ok { // no allocation for the lookup
		return s
	}
	s := string(b)
	if in.m == nil {
		in.m = make(map[string]string)
	}
	if len(in.m) < maxInterned {
		in.m[s] = s
	}
	return s
}
