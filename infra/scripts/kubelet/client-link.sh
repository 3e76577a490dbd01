# Makes the kubelet's current client certificate .Current the pair .Pair
# stored beside it: a link made under the temporary name .Link, then
# renamed over .Current, as the kubelet's own certificate store does, so
# the kubelet never finds the name missing. Prints nothing.
link={{q .Link}}
ln -sfn {{q .Pair}} "$link"
mv -Tf "$link" {{q .Current}}
