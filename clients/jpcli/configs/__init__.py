"""Config in `jp` beyond `config_files`: named config files and personas (`--cfg`), and
`jp config set` (`cli`, `setting`)."""
