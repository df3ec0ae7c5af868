from duragent.client.cli import main

main()
