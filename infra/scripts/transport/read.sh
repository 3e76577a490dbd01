# Prints the file .Path whole, as the SSH transport's Read returns it;
# exits .Missing when there is no such file (cat itself only ever exits 0
# or 1), so an absent file is told from one that cannot be read.
p={{q .Path}}
if [ ! -e "$p" ]; then exit {{.Missing}}; fi
exec cat -- "$p"
