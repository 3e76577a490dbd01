# Removes an upload's temporary file .Tmp left by an interrupted upload.
rm -f -- {{q .Tmp}}
