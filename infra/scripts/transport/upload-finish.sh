# Gives the uploaded temporary file .Tmp its mode .Mode (octal) and renames
# it over .Path in one step, so a reader sees the old file or the new one,
# never a half-written one; on failure the temporary file goes.
if ! { chmod {{.Mode}} {{q .Tmp}} && mv -f -- {{q .Tmp}} {{q .Path}}; }; then
	rm -f -- {{q .Tmp}}
	exit 1
fi
