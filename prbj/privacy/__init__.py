"""Personal data in a run: pseudonyms per user (Presidio, loaded only when a run pseudonymizes), the private
store that keeps personal text out of run directories, and the privacy step a run passes its pairs through."""
