module github.com/syncledger/syncledger

go 1.26
