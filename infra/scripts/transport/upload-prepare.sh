# Makes the directory .Dir for an upload to .Path, and refuses when .Path
# is a directory: the upload's final rename would otherwise move the file
# into it.
mkdir -p -- {{q .Dir}}
if [ -d {{q .Path}} ]; then
	echo {{q .Path}}' is a directory' >&2
	exit 1
fi
