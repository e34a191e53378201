package host

import "github.com/syncledger/syncledger/projector"

// ledgerLeft reports whether the disk holds, at ch's path, something the
// ledger itself left there and the Change's Old does not describe: no file
// where Old was shadowed (a directory of its name held other paths), or one of
// the versions earlier events of the Ready wrote (projector.Change.Earlier) —
// committed content, not a local change: typically this host's own commit
// whose outcome it never learned (a crash after the append, an answer lost),
// which others have changed since.
func (d *diskState) ledgerLeft(ch projector.Change) bool {
	if ch.OldShadowed && !d.exists {
		return true
	}
	for _, f := range ch.Earlier {
		if d.matches(f) {
			return true
		}
	}
	return false
}
