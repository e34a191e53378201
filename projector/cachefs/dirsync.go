//go:build !windows

package cachefs

// dirSync: a directory is fsynced to make the renames and removals in it
// durable (docs/design.md §9).
const dirSync = true
